// ferrograd's CUDA kernels, compiled at run time by NVRTC for the device's architecture.
//
// Every elementwise kernel takes its operands as (pointer, Strided) pairs passed by value: a
// layout with ndim == -1 is contiguous (element i lives at offset + i), otherwise element i of
// the row-major output is found by unravelling i over the layout's shape. Loops are
// grid-strided. Reductions and softmax work on contiguous rows (the host moves the reduced
// axis last first) with one block per row and warp shuffles.

#define MAX_DIMS 8

struct Strided {
    int ndim;
    long long offset;
    long long shape[MAX_DIMS];
    long long strides[MAX_DIMS];
};

__device__ __forceinline__ long long pos(const Strided& l, long long i) {
    if (l.ndim < 0) return l.offset + i;
    long long off = l.offset;
    for (int d = l.ndim - 1; d >= 0; --d) {
        long long s = l.shape[d];
        long long q = i / s;
        off += (i - q * s) * l.strides[d];
        i = q;
    }
    return off;
}

#define GRID_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

typedef unsigned char u8;

template <typename T> __device__ __forceinline__ T sgn(T v) {
    return v > T(0) ? T(1) : (v < T(0) ? T(-1) : v * T(0));
}

template <typename T> __device__ __forceinline__ T unary_float(int op, T v) {
    switch (op) {
        case 0: return -v;
        case 1: return exp(v);
        case 2: return log(v);
        case 3: return sqrt(v);
        case 4: return fabs(v);
        case 5: return tanh(v);
        case 6: return v >= T(0) ? T(1) / (T(1) + exp(-v)) : exp(v) / (T(1) + exp(v));
        case 7: return v > T(0) ? v : T(0);
        default: return sgn(v);
    }
}

__device__ __forceinline__ long long unary_int(int op, long long v) {
    switch (op) {
        case 0: return -v;
        case 4: return v < 0 ? -v : v;
        case 7: return v > 0 ? v : 0;
        default: return v > 0 ? 1 : (v < 0 ? -1 : 0);
    }
}

template <typename T> __device__ __forceinline__ T binary_float(int op, T a, T b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return pow(a, b);
        case 5: return (a >= b || a != a) ? a : b;
        default: return (a <= b || a != a) ? a : b;
    }
}

__device__ __forceinline__ long long binary_int(int op, long long a, long long b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 5: return a > b ? a : b;
        default: return a < b ? a : b;
    }
}

template <typename T> __device__ __forceinline__ u8 compare(int op, T a, T b) {
    switch (op) {
        case 0: return a == b;
        case 1: return a != b;
        case 2: return a < b;
        case 3: return a <= b;
        case 4: return a > b;
        default: return a >= b;
    }
}

#define UNARY(NAME, T, F)                                                                     \
    extern "C" __global__ void NAME(int op, const T* x, Strided lx, T* out, long long n) {    \
        GRID_LOOP(i, n) { out[i] = F(op, x[pos(lx, i)]); }                                    \
    }
UNARY(unary_f32, float, unary_float<float>)
UNARY(unary_f64, double, unary_float<double>)
UNARY(unary_i64, long long, unary_int)

#define BINARY(NAME, T, F)                                                                    \
    extern "C" __global__ void NAME(int op, const T* a, Strided la, const T* b, Strided lb,   \
                                    T* out, long long n) {                                    \
        GRID_LOOP(i, n) { out[i] = F(op, a[pos(la, i)], b[pos(lb, i)]); }                     \
    }
BINARY(binary_f32, float, binary_float<float>)
BINARY(binary_f64, double, binary_float<double>)
BINARY(binary_i64, long long, binary_int)

// dst op= b through dst's view, one pass (b already broadcast to dst's shape; the host makes
// sure no two elements of the view share memory and b is not dst's storage)
#define BINARY_ASSIGN(NAME, T, F)                                                             \
    extern "C" __global__ void NAME(int op, T* dst, Strided ld, const T* b, Strided lb,       \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            long long p = pos(ld, i);                                                         \
            dst[p] = F(op, dst[p], b[pos(lb, i)]);                                            \
        }                                                                                     \
    }
BINARY_ASSIGN(binary_assign_f32, float, binary_float<float>)
BINARY_ASSIGN(binary_assign_f64, double, binary_float<double>)
BINARY_ASSIGN(binary_assign_i64, long long, binary_int)

// backward of tanh (op 5), sigmoid (6) and relu (7) from the activation's output y
#define ACT_GRAD(NAME, T)                                                                     \
    extern "C" __global__ void NAME(int op, const T* dy, Strided ldy, const T* y, Strided ly, \
                                    T* out, long long n) {                                    \
        GRID_LOOP(i, n) {                                                                     \
            T g = dy[pos(ldy, i)], v = y[pos(ly, i)];                                         \
            out[i] = op == 5 ? g * (T(1) - v * v)                                             \
                             : (op == 6 ? g * v * (T(1) - v) : (v > T(0) ? g : T(0)));        \
        }                                                                                     \
    }
ACT_GRAD(act_grad_f32, float)
ACT_GRAD(act_grad_f64, double)

#define COMPARE(NAME, T)                                                                      \
    extern "C" __global__ void NAME(int op, const T* a, Strided la, const T* b, Strided lb,   \
                                    u8* out, long long n) {                                   \
        GRID_LOOP(i, n) { out[i] = compare<T>(op, a[pos(la, i)], b[pos(lb, i)]); }            \
    }
COMPARE(compare_f32, float)
COMPARE(compare_f64, double)
COMPARE(compare_i64, long long)
COMPARE(compare_u8, u8)

#define WHERE(NAME, T)                                                                        \
    extern "C" __global__ void NAME(const u8* c, Strided lc, const T* a, Strided la,          \
                                    const T* b, Strided lb, T* out, long long n) {            \
        GRID_LOOP(i, n) { out[i] = c[pos(lc, i)] ? a[pos(la, i)] : b[pos(lb, i)]; }           \
    }
WHERE(where_f32, float)
WHERE(where_f64, double)
WHERE(where_i64, long long)
WHERE(where_u8, u8)

#define POW_SCALAR(NAME, T)                                                                   \
    extern "C" __global__ void NAME(const T* x, Strided lx, double p, T* out, long long n) {  \
        GRID_LOOP(i, n) { out[i] = pow(x[pos(lx, i)], (T)p); }                                \
    }
POW_SCALAR(pow_scalar_f32, float)
POW_SCALAR(pow_scalar_f64, double)

// casts (and same-type strided copies): floats to int truncate, anything to bool is != 0
#define CAST(NAME, S, D, EXPR)                                                                \
    extern "C" __global__ void NAME(const S* x, Strided lx, D* out, long long n) {            \
        GRID_LOOP(i, n) {                                                                     \
            S v = x[pos(lx, i)];                                                              \
            out[i] = (EXPR);                                                                  \
        }                                                                                     \
    }
CAST(cast_f32_f32, float, float, v)
CAST(cast_f32_f64, float, double, (double)v)
CAST(cast_f32_i64, float, long long, (long long)v)
CAST(cast_f32_u8, float, u8, (u8)(v != 0.0f))
CAST(cast_f64_f32, double, float, (float)v)
CAST(cast_f64_f64, double, double, v)
CAST(cast_f64_i64, double, long long, (long long)v)
CAST(cast_f64_u8, double, u8, (u8)(v != 0.0))
CAST(cast_i64_f32, long long, float, (float)v)
CAST(cast_i64_f64, long long, double, (double)v)
CAST(cast_i64_i64, long long, long long, v)
CAST(cast_i64_u8, long long, u8, (u8)(v != 0))
CAST(cast_u8_f32, u8, float, (float)v)
CAST(cast_u8_f64, u8, double, (double)v)
CAST(cast_u8_i64, u8, long long, (long long)v)
CAST(cast_u8_u8, u8, u8, v)

// dst[ld(i)] = src[ls(i)]: writes through a strided destination view
#define WRITE(NAME, T)                                                                        \
    extern "C" __global__ void NAME(const T* src, Strided ls, T* dst, Strided ld,             \
                                    long long n) {                                            \
        GRID_LOOP(i, n) { dst[pos(ld, i)] = src[pos(ls, i)]; }                                \
    }
WRITE(write_f32, float)
WRITE(write_f64, double)
WRITE(write_i64, long long)
WRITE(write_u8, u8)

#define FILL(NAME, T)                                                                         \
    extern "C" __global__ void NAME(T* out, double v, long long n) {                           \
        GRID_LOOP(i, n) { out[i] = (T)v; }                                                    \
    }
FILL(fill_f32, float)
FILL(fill_f64, double)
FILL(fill_i64, long long)
FILL(fill_u8, u8)

template <typename T> __device__ __forceinline__ T combine(int op, T a, T b) {
    if (op == 0) return a + b;
    if (op == 1) return (b > a || b != b) ? b : a;
    return (b < a || b != b) ? b : a;
}

template <typename T> __device__ __forceinline__ T warp_reduce(int op, T v) {
    for (int o = 16; o > 0; o >>= 1) v = combine(op, v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

// One block per row of a contiguous [rows, cols] buffer; op 0 sum, 1 max, 2 min.
#define REDUCE_ROWS(NAME, T)                                                                  \
    extern "C" __global__ void NAME(int op, const T* x, T* out, long long rows, long long cols, \
                                    T init) {                                                 \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            T acc = init;                                                                     \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x)                        \
                acc = combine(op, acc, x[r * cols + c]);                                      \
            acc = warp_reduce(op, acc);                                                       \
            if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;                     \
            __syncthreads();                                                                  \
            if (threadIdx.x < 32) {                                                           \
                acc = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : init;          \
                acc = warp_reduce(op, acc);                                                   \
                if (threadIdx.x == 0) out[r] = acc;                                           \
            }                                                                                 \
            __syncthreads();                                                                  \
        }                                                                                     \
    }
REDUCE_ROWS(reduce_rows_f32, float)
REDUCE_ROWS(reduce_rows_f64, double)
REDUCE_ROWS(reduce_rows_i64, long long)

template <typename T> __device__ T block_reduce(int op, T v, T init, T* partial) {
    v = warp_reduce(op, v);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : init;
        v = warp_reduce(op, v);
        if (threadIdx.x == 0) partial[0] = v;
    }
    __syncthreads();
    T r = partial[0];
    __syncthreads();
    return r;
}

// Softmax (or log-softmax) of each row of a contiguous [rows, cols] buffer.
#define SOFTMAX_ROWS(NAME, T, NEG_INF)                                                        \
    extern "C" __global__ void NAME(const T* x, T* out, long long rows, long long cols,       \
                                    int log_out) {                                            \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            T* yr = out + r * cols;                                                           \
            T m = NEG_INF;                                                                    \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = combine(1, m, xr[c]); \
            m = block_reduce(1, m, (T)NEG_INF, partial);                                      \
            if (!(m > NEG_INF && m < -NEG_INF)) m = T(0);                                     \
            T s = T(0);                                                                       \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += exp(xr[c] - m);   \
            s = block_reduce(0, s, T(0), partial);                                            \
            if (log_out) {                                                                    \
                T ls = log(s);                                                                \
                for (long long c = threadIdx.x; c < cols; c += blockDim.x)                    \
                    yr[c] = xr[c] - m - ls;                                                   \
            } else {                                                                          \
                T inv = T(1) / s;                                                             \
                for (long long c = threadIdx.x; c < cols; c += blockDim.x)                    \
                    yr[c] = exp(xr[c] - m) * inv;                                             \
            }                                                                                 \
        }                                                                                     \
    }
SOFTMAX_ROWS(softmax_rows_f32, float, __int_as_float(0xff800000))
SOFTMAX_ROWS(softmax_rows_f64, double, __longlong_as_double(0xfff0000000000000ULL))

// Position in `target` of output element i (row-major over `li`'s shape) with `axis`
// replaced by the index value j.
__device__ __forceinline__ long long along(const Strided& li, const Strided& target, int axis,
                                          long long i, long long j) {
    long long off = target.offset;
    for (int d = li.ndim - 1; d >= 0; --d) {
        long long s = li.shape[d];
        long long q = i / s;
        long long k = i - q * s;
        off += (d == axis ? j : k) * target.strides[d];
        i = q;
    }
    return off;
}

__device__ __forceinline__ long long wrap(long long j, long long size) {
    if (j < 0) j += size;
    return j < 0 ? 0 : (j >= size ? size - 1 : j);
}

// out[i] = x[i with axis replaced by idx[i]]; `li` describes idx with its full shape (ndim >= 0)
#define GATHER(NAME, T)                                                                       \
    extern "C" __global__ void NAME(const T* x, Strided lx, const long long* idx, Strided li, \
                                    Strided lis, int axis, long long size, T* out,            \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            long long j = wrap(idx[pos(lis, i)], size);                                       \
            out[i] = x[along(li, lx, axis, i, j)];                                            \
        }                                                                                     \
    }
GATHER(gather_f32, float)
GATHER(gather_f64, double)
GATHER(gather_i64, long long)
GATHER(gather_u8, u8)

__device__ __forceinline__ void add_to(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_to(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_to(long long* p, long long v) {
    atomicAdd((unsigned long long*)p, (unsigned long long)v);
}

// out (zeros, contiguous, layout lo) [i with axis replaced by idx[i]] += src[i]
#define SCATTER_ADD(NAME, T)                                                                  \
    extern "C" __global__ void NAME(const T* src, Strided ls, const long long* idx,           \
                                    Strided li, Strided lis, int axis, long long size,        \
                                    T* out, Strided lo, long long n) {                        \
        GRID_LOOP(i, n) {                                                                     \
            long long j = wrap(idx[pos(lis, i)], size);                                       \
            add_to(out + along(li, lo, axis, i, j), src[pos(ls, i)]);                         \
        }                                                                                     \
    }
SCATTER_ADD(scatter_add_f32, float)
SCATTER_ADD(scatter_add_f64, double)
SCATTER_ADD(scatter_add_i64, long long)

struct Window {
    long long c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// x [n, c, h, w] (strided) to contiguous [n, oh*ow, c, kh*kw]
#define UNFOLD(NAME, T)                                                                       \
    extern "C" __global__ void NAME(const T* x, Strided lx, Window g, double pad, T* out,     \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            long long kk = g.kh * g.kw, l = g.oh * g.ow;                                      \
            long long k = i % kk, ci = (i / kk) % g.c, p = (i / (kk * g.c)) % l;              \
            long long ni = i / (kk * g.c * l);                                                \
            long long ki = k / g.kw, kj = k % g.kw, y = p / g.ow, xo = p % g.ow;              \
            long long ih = y * g.sh + ki * g.dh - g.ph, iw = xo * g.sw + kj * g.dw - g.pw;    \
            T v = (T)pad;                                                                     \
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)                                   \
                v = x[lx.offset + ni * lx.strides[0] + ci * lx.strides[1] +                   \
                      ih * lx.strides[2] + iw * lx.strides[3]];                               \
            out[i] = v;                                                                       \
        }                                                                                     \
    }
UNFOLD(unfold_f32, float)
UNFOLD(unfold_f64, double)

// contiguous cols [n, oh*ow, c, kh*kw] summed into zeros [n, c, h, w]
#define FOLD(NAME, T)                                                                         \
    extern "C" __global__ void NAME(const T* cols, Window g, T* out, long long n) {           \
        GRID_LOOP(i, n) {                                                                     \
            long long kk = g.kh * g.kw, l = g.oh * g.ow;                                      \
            long long k = i % kk, ci = (i / kk) % g.c, p = (i / (kk * g.c)) % l;              \
            long long ni = i / (kk * g.c * l);                                                \
            long long ki = k / g.kw, kj = k % g.kw, y = p / g.ow, xo = p % g.ow;              \
            long long ih = y * g.sh + ki * g.dh - g.ph, iw = xo * g.sw + kj * g.dw - g.pw;    \
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)                                   \
                add_to(out + ((ni * g.c + ci) * g.h + ih) * g.w + iw, cols[i]);               \
        }                                                                                     \
    }
FOLD(fold_f32, float)
FOLD(fold_f64, double)

// Flat h*w position of each max-pooling window's maximum of x [n, c, h, w] (strided), as
// [n, c, oh*ow]: first on ties, NaN wins, 0 for a window entirely in the padding.
#define POOL_ARGMAX(NAME, T)                                                                  \
    extern "C" __global__ void NAME(const T* x, Strided lx, Window g, long long* out,         \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            long long l = g.oh * g.ow, p = i % l, plane = i / l;                              \
            long long ni = plane / g.c, ci = plane % g.c, oy = p / g.ow, ox = p % g.ow;       \
            long long base = lx.offset + ni * lx.strides[0] + ci * lx.strides[1];             \
            long long best = -1;                                                              \
            T bv = (T)0;                                                                      \
            for (long long ki = 0; ki < g.kh; ++ki) {                                         \
                long long iy = oy * g.sh + ki * g.dh - g.ph;                                  \
                if (iy < 0 || iy >= g.h) continue;                                            \
                for (long long kj = 0; kj < g.kw; ++kj) {                                     \
                    long long ix = ox * g.sw + kj * g.dw - g.pw;                              \
                    if (ix < 0 || ix >= g.w) continue;                                        \
                    T v = x[base + iy * lx.strides[2] + ix * lx.strides[3]];                  \
                    if (best < 0 || v > bv || (v != v && bv == bv)) {                         \
                        best = iy * g.w + ix;                                                 \
                        bv = v;                                                               \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            out[i] = best < 0 ? 0 : best;                                                     \
        }                                                                                     \
    }
POOL_ARGMAX(pool_argmax_f32, float)
POOL_ARGMAX(pool_argmax_f64, double)
POOL_ARGMAX(pool_argmax_i64, long long)
POOL_ARGMAX(pool_argmax_u8, u8)

// Batched products of contiguous int64 matrices: c[b] = a[b] (m x k) times b[b] (k x n); a
// batch stride of 0 shares one matrix (cuBLAS has no integer GEMM).
extern "C" __global__ void matmul_i64(const long long* a, long long sa, const long long* b,
                                      long long sb, long long* c, long long m, long long k,
                                      long long n, long long total) {
    GRID_LOOP(i, total) {
        long long j = i % n, r = (i / n) % m, bi = i / (m * n);
        const long long* ar = a + bi * sa + r * k;
        const long long* bc = b + bi * sb + j;
        long long acc = 0;
        for (long long p = 0; p < k; ++p) acc += ar[p] * bc[p * n];
        c[i] = acc;
    }
}
