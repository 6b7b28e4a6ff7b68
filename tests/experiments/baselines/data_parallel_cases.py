"""The command-line refusals both anchors of --gpus N share (pytorch_ddp.py,
jax_data_parallel.py, through baseline_options.add_data_parallel_run_options): each argument list,
given after --data and --batch 16 on a 40-sample set, and the words its exit-2 message holds."""

BAD_OPTIONS = [
    (["--gpus", "1"], "--gpus 1: this trains on several GPUs"),
    (["--batch", "0"], "--batch must be > 0"),
    (["--epochs", "0"], "--epochs must be > 0"),
    (["--lr", "0"], "--lr must be > 0"),
    (["--momentum", "1"], "--momentum must be in [0, 1)"),
    (["--device", "cpu"], "needs --device cuda"),
    (["--train-acc"], "does not count training accuracy"),
    (["--batch", "41"], "larger than the training set"),
    (["--json", "/nonexistent-dir/x.jsonl"], "does the directory exist"),
    (["--loss-curve", "/nonexistent-dir/c.csv"], "cannot write"),
    (["--hidden", "0"], "layer sizes must be positive"),
]
