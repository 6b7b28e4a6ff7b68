// Placeholder while the CLI is written (replaced in the same working session).
int main() { return 0; }
