// hd.h: MEMSTRAT_HD, the `__host__ __device__` marker of functions that one source compiles for
// both the host and the GPU (splitmix64.h, augment_math.h). Empty where the host compiler alone
// reads the file (a .cpp), so such headers need no CUDA header there.
#pragma once

#ifdef __CUDACC__
#define MEMSTRAT_HD __host__ __device__
#else
#define MEMSTRAT_HD
#endif
