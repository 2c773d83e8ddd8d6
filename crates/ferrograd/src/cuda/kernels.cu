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
    // not unrolled: the divisions dominate, and unrolling made every kernel 2x larger
#pragma unroll 1
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
    return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}

/// The remainder of the floored division: C's `fmod` (the sign of `a`), with `b` added where
/// the signs differ (Python's `%`, the sign of `b`).
template <typename T> __device__ __forceinline__ T floor_mod(T a, T b) {
    T m = fmod(a, b);
    return (m != T(0) && ((b < T(0)) != (m < T(0)))) ? m + b : m;
}

// ---- unary ops: one line per op of the engine's unary table (`ops/unary.rs`), a kernel per
// ---- dtype named unary_<name>_<dtype>. The expression computes `v`'s result.

#define UNARY_KERNEL(NAME, T, EXPR)                                                           \
    extern "C" __global__ void NAME(const T* x, Strided lx, T* out, long long n) {            \
        GRID_LOOP(i, n) {                                                                     \
            T v = x[pos(lx, i)];                                                              \
            out[i] = (EXPR);                                                                  \
        }                                                                                     \
    }
#define UNARY_FLOAT(name, EXPR)                                                               \
    UNARY_KERNEL(unary_##name##_f32, float, EXPR)                                             \
    UNARY_KERNEL(unary_##name##_f64, double, EXPR)
#define UNARY_INT(name, EXPR) UNARY_KERNEL(unary_##name##_i64, long long, EXPR)

UNARY_FLOAT(neg, -v)
UNARY_INT(neg, -v)
UNARY_FLOAT(exp, exp(v))
UNARY_FLOAT(log, log(v))
UNARY_FLOAT(log1p, log1p(v))
UNARY_FLOAT(sqrt, sqrt(v))
UNARY_FLOAT(abs, fabs(v))
UNARY_INT(abs, v < 0 ? -v : v)
UNARY_FLOAT(tanh, tanh(v))
UNARY_FLOAT(sigmoid, v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)))
UNARY_FLOAT(relu, v < 0 ? 0 : v)
UNARY_INT(relu, v > 0 ? v : 0)
UNARY_FLOAT(sign, sgn(v))
UNARY_INT(sign, v > 0 ? 1 : (v < 0 ? -1 : 0))
UNARY_FLOAT(sin, sin(v))
UNARY_FLOAT(cos, cos(v))
UNARY_FLOAT(tan, tan(v))
UNARY_FLOAT(asin, asin(v))
UNARY_FLOAT(acos, acos(v))
UNARY_FLOAT(atan, atan(v))
UNARY_FLOAT(sinh, sinh(v))
UNARY_FLOAT(cosh, cosh(v))
UNARY_FLOAT(erf, erf(v))
UNARY_FLOAT(erfc, erfc(v))
UNARY_FLOAT(expm1, expm1(v))
UNARY_FLOAT(exp2, exp2(v))
UNARY_FLOAT(log2, log2(v))
UNARY_FLOAT(log10, log10(v))
UNARY_FLOAT(rsqrt, 1 / sqrt(v))
UNARY_FLOAT(reciprocal, 1 / v)
UNARY_FLOAT(square, v * v)
UNARY_INT(square, v * v)
UNARY_FLOAT(softplus, v > 20 ? v : log1p(exp(v)))
UNARY_FLOAT(silu, v >= 0 ? v / (1 + exp(-v)) : v * exp(v) / (1 + exp(v)))
// (one line each: the fused kernels take these lines as they are; constants in the element's
// own type through decltype(v))
UNARY_FLOAT(gelu, (decltype(v))0.5 * v * ((decltype(v))1 + erf(v * (decltype(v))0.70710678118654752440)))
UNARY_FLOAT(gelu_slope, (decltype(v))0.5 * ((decltype(v))1 + erf(v * (decltype(v))0.70710678118654752440)) + v * exp((decltype(v))-0.5 * v * v) * (decltype(v))0.39894228040143267794)
UNARY_FLOAT(floor, floor(v))
UNARY_INT(floor, v)
UNARY_FLOAT(ceil, ceil(v))
UNARY_INT(ceil, v)
UNARY_FLOAT(round, rint(v))
UNARY_INT(round, v)
UNARY_FLOAT(trunc, trunc(v))
UNARY_INT(trunc, v)

// ---- binary ops: one line per op of the engine's binary table (`ops/binary.rs`): kernels
// ---- binary_<name>_<dtype> (out of place, both operands broadcast to the output) and
// ---- binary_assign_<name>_<dtype> (dst = dst op b through dst's view, one pass; the host makes
// ---- sure no two elements of the view share memory and b is not dst's storage).

#define BINARY_KERNELS(name, T, SUFFIX, EXPR)                                                 \
    extern "C" __global__ void binary_##name##_##SUFFIX(const T* pa, Strided la, const T* pb, \
                                                        Strided lb, T* out, long long n) {    \
        GRID_LOOP(i, n) {                                                                     \
            T a = pa[pos(la, i)], b = pb[pos(lb, i)];                                         \
            out[i] = (EXPR);                                                                  \
        }                                                                                     \
    }                                                                                         \
    extern "C" __global__ void binary_assign_##name##_##SUFFIX(T* dst, Strided ld,            \
                                                               const T* pb, Strided lb,       \
                                                               long long n) {                 \
        GRID_LOOP(i, n) {                                                                     \
            long long p = pos(ld, i);                                                         \
            T a = dst[p], b = pb[pos(lb, i)];                                                 \
            dst[p] = (EXPR);                                                                  \
        }                                                                                     \
    }
#define BINARY_FLOAT(name, EXPR)                                                              \
    BINARY_KERNELS(name, float, f32, EXPR)                                                    \
    BINARY_KERNELS(name, double, f64, EXPR)
#define BINARY_INT(name, EXPR) BINARY_KERNELS(name, long long, i64, EXPR)

BINARY_FLOAT(add, a + b)
BINARY_INT(add, a + b)
BINARY_FLOAT(sub, a - b)
BINARY_INT(sub, a - b)
BINARY_FLOAT(mul, a * b)
BINARY_INT(mul, a * b)
BINARY_FLOAT(div, a / b)
BINARY_FLOAT(pow, pow(a, b))
BINARY_FLOAT(maximum, (a >= b || a != a) ? a : b)
BINARY_INT(maximum, a > b ? a : b)
BINARY_FLOAT(minimum, (a <= b || a != a) ? a : b)
BINARY_INT(minimum, a < b ? a : b)
BINARY_FLOAT(atan2, atan2(a, b))
BINARY_FLOAT(fmod, fmod(a, b))
BINARY_FLOAT(remainder, floor_mod(a, b))

// ---- comparisons (`ops/binary.rs`'s compare table): compare_<name>_<dtype>, bool results.

#define COMPARE_KERNEL(name, T, SUFFIX, EXPR)                                                 \
    extern "C" __global__ void compare_##name##_##SUFFIX(const T* pa, Strided la,             \
                                                         const T* pb, Strided lb, u8* out,    \
                                                         long long n) {                       \
        GRID_LOOP(i, n) {                                                                     \
            T a = pa[pos(la, i)], b = pb[pos(lb, i)];                                         \
            out[i] = (EXPR);                                                                  \
        }                                                                                     \
    }
#define COMPARE(name, EXPR)                                                                   \
    COMPARE_KERNEL(name, float, f32, EXPR)                                                    \
    COMPARE_KERNEL(name, double, f64, EXPR)                                                   \
    COMPARE_KERNEL(name, long long, i64, EXPR)                                                \
    COMPARE_KERNEL(name, u8, u8, EXPR)

COMPARE(equal, a == b)
COMPARE(not_equal, a != b)
COMPARE(less, a < b)
COMPARE(less_equal, a <= b)
COMPARE(greater, a > b)
COMPARE(greater_equal, a >= b)

// ---- the activations' gradients from their outputs y: <name>_<dtype>

#define ACT_GRAD(name, EXPR)                                                                  \
    ACT_GRAD_KERNEL(name##_f32, float, EXPR)                                                  \
    ACT_GRAD_KERNEL(name##_f64, double, EXPR)
#define ACT_GRAD_KERNEL(NAME, T, EXPR)                                                        \
    extern "C" __global__ void NAME(const T* dy, Strided ldy, const T* y, Strided ly, T* out, \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            T g = dy[pos(ldy, i)], v = y[pos(ly, i)];                                         \
            out[i] = (EXPR);                                                                  \
        }                                                                                     \
    }

ACT_GRAD(tanh_grad, g * (1 - v * v))
ACT_GRAD(sigmoid_grad, g * v * (1 - v))
ACT_GRAD(relu_grad, (v > 0 || v != v) ? g : 0)

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

// ---- storage-only dtypes: float16 and bfloat16 (their bits), int32, int16, int8, uint8. Ops
// compute them in float32 / int64 (the host casts around each op); only casts, writes and
// fills touch them here. `u8` stays bool's storage, so uint8 is a type of its own.
struct f16_t {
    unsigned short bits;
};
struct bf16_t {
    unsigned short bits;
};
struct ui8_t {
    unsigned char v;
};

__device__ __forceinline__ float bits_float(unsigned int b) {
    union {
        unsigned int u;
        float f;
    } c;
    c.u = b;
    return c.f;
}
__device__ __forceinline__ unsigned int float_bits(float f) {
    union {
        unsigned int u;
        float f;
    } c;
    c.f = f;
    return c.u;
}

__device__ __forceinline__ float half_to_float(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    unsigned int e = ((unsigned int)h >> 10) & 0x1fu, m = (unsigned int)h & 0x3ffu;
    if (e == 0) {  // zero or subnormal: m * 2^-24
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));  // inf, NaN
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// round to nearest, ties to even; overflow gives infinity, NaN stays NaN
__device__ __forceinline__ unsigned short float_to_half(float f) {
    unsigned int x = float_bits(f);
    unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520: infinity
    if (ax < 0x38800000u) {  // below 2^-14: a subnormal (exact scaling, then round half even)
        float scaled = bits_float(ax) * 16777216.0f;
        return (unsigned short)(sign | (unsigned int)nearbyint(scaled));
    }
    ax += 0xfffu + ((ax >> 13) & 1u);
    return (unsigned short)(sign | ((ax - (112u << 23)) >> 13));
}

__device__ __forceinline__ float bf16_to_float(unsigned short b) { return bits_float((unsigned int)b << 16); }
__device__ __forceinline__ unsigned short float_to_bf16(float f) {
    unsigned int x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}

// Every dtype's way to and from the two carriers: int64 for integers and bool (exact),
// double for floats (exact for every float dtype).
template <typename T> struct Conv {
    static constexpr bool is_int = true;
    __device__ static long long to_i(T v) { return (long long)v; }
    __device__ static double to_f(T v) { return (double)v; }
    __device__ static T from_i(long long v) { return (T)v; }
    __device__ static T from_f(double v) { return (T)(long long)v; }
};
template <> struct Conv<float> {
    static constexpr bool is_int = false;
    __device__ static long long to_i(float v) { return (long long)v; }
    __device__ static double to_f(float v) { return (double)v; }
    __device__ static float from_i(long long v) { return (float)v; }
    __device__ static float from_f(double v) { return (float)v; }
};
template <> struct Conv<double> {
    static constexpr bool is_int = false;
    __device__ static long long to_i(double v) { return (long long)v; }
    __device__ static double to_f(double v) { return v; }
    __device__ static double from_i(long long v) { return (double)v; }
    __device__ static double from_f(double v) { return v; }
};
template <> struct Conv<u8> {  // bool
    static constexpr bool is_int = true;
    __device__ static long long to_i(u8 v) { return (long long)v; }
    __device__ static double to_f(u8 v) { return (double)v; }
    __device__ static u8 from_i(long long v) { return (u8)(v != 0); }
    __device__ static u8 from_f(double v) { return (u8)(v != 0.0); }
};
template <> struct Conv<ui8_t> {
    static constexpr bool is_int = true;
    __device__ static long long to_i(ui8_t v) { return (long long)v.v; }
    __device__ static double to_f(ui8_t v) { return (double)v.v; }
    __device__ static ui8_t from_i(long long v) { return ui8_t{(unsigned char)v}; }
    __device__ static ui8_t from_f(double v) { return ui8_t{(unsigned char)(long long)v}; }
};
// (a double rounds to float first: a double within half an ulp of a float16 tie can round
// differently from numpy's direct conversion)
template <> struct Conv<f16_t> {
    static constexpr bool is_int = false;
    __device__ static long long to_i(f16_t v) { return (long long)half_to_float(v.bits); }
    __device__ static double to_f(f16_t v) { return (double)half_to_float(v.bits); }
    __device__ static f16_t from_i(long long v) { return f16_t{float_to_half((float)v)}; }
    __device__ static f16_t from_f(double v) { return f16_t{float_to_half((float)v)}; }
};
template <> struct Conv<bf16_t> {
    static constexpr bool is_int = false;
    __device__ static long long to_i(bf16_t v) { return (long long)bf16_to_float(v.bits); }
    __device__ static double to_f(bf16_t v) { return (double)bf16_to_float(v.bits); }
    __device__ static bf16_t from_i(long long v) { return bf16_t{float_to_bf16((float)v)}; }
    __device__ static bf16_t from_f(double v) { return bf16_t{float_to_bf16((float)v)}; }
};

// casts (and same-type strided copies): floats to int truncate, anything to bool is != 0,
// integers wrap to narrower ones
template <typename S, typename D>
__device__ __forceinline__ void cast_body(const S* x, const Strided& lx, D* out, long long n) {
    GRID_LOOP(i, n) {
        S v = x[pos(lx, i)];
        out[i] = Conv<S>::is_int ? Conv<D>::from_i(Conv<S>::to_i(v)) : Conv<D>::from_f(Conv<S>::to_f(v));
    }
}
#define CAST(SN, S, DN, D)                                                                    \
    extern "C" __global__ void cast_##SN##_##DN(const S* x, Strided lx, D* out, long long n) { \
        cast_body<S, D>(x, lx, out, n);                                                       \
    }
#define CAST_FROM(SN, S)                                                                      \
    CAST(SN, S, f32, float)                                                                   \
    CAST(SN, S, f64, double)                                                                  \
    CAST(SN, S, i64, long long)                                                               \
    CAST(SN, S, u8, u8)                                                                       \
    CAST(SN, S, f16, f16_t)                                                                   \
    CAST(SN, S, bf16, bf16_t)                                                                 \
    CAST(SN, S, i32, int)                                                                     \
    CAST(SN, S, i16, short)                                                                   \
    CAST(SN, S, i8, signed char)                                                              \
    CAST(SN, S, ui8, ui8_t)
CAST_FROM(f32, float)
CAST_FROM(f64, double)
CAST_FROM(i64, long long)
CAST_FROM(u8, u8)
CAST_FROM(f16, f16_t)
CAST_FROM(bf16, bf16_t)
CAST_FROM(i32, int)
CAST_FROM(i16, short)
CAST_FROM(i8, signed char)
CAST_FROM(ui8, ui8_t)

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
WRITE(write_f16, f16_t)
WRITE(write_bf16, bf16_t)
WRITE(write_i32, int)
WRITE(write_i16, short)
WRITE(write_i8, signed char)
WRITE(write_ui8, ui8_t)

#define FILL(NAME, T)                                                                         \
    extern "C" __global__ void NAME(T* out, double v, long long n) {                           \
        GRID_LOOP(i, n) { out[i] = Conv<T>::from_f(v); }                                      \
    }
FILL(fill_f32, float)
FILL(fill_f64, double)
FILL(fill_i64, long long)
FILL(fill_u8, u8)
FILL(fill_f16, f16_t)
FILL(fill_bf16, bf16_t)
FILL(fill_i32, int)
FILL(fill_i16, short)
FILL(fill_i8, signed char)
FILL(fill_ui8, ui8_t)

// Combining two partial results of a reduction: sum, or max / min where NaN wins.
struct SumOp {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
        return (b > a || b != b) ? b : a;
    }
};
struct MinOp {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
        return (b < a || b != b) ? b : a;
    }
};

template <typename T, typename Op> __device__ __forceinline__ T warp_reduce(Op op, T v) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

template <typename T, typename Op> __device__ T block_reduce(Op op, T v, T init, T* partial) {
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

// One block per row of a contiguous [rows, cols] buffer: reduce_<sum|max|min>_<dtype>. Each
// thread keeps four accumulators over coalesced columns, so four loads are in flight at once
// (one accumulator left a single load per thread waiting); the order is fixed.
#define REDUCE_ROWS(NAME, T, OP, INIT)                                                        \
    extern "C" __global__ void NAME(const T* x, T* out, long long rows, long long cols) {     \
        __shared__ T partial[32];                                                             \
        const long long step = blockDim.x;                                                    \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* row = x + r * cols;                                                      \
            T a0 = (INIT), a1 = (INIT), a2 = (INIT), a3 = (INIT);                             \
            long long c = threadIdx.x;                                                        \
            for (; c + 3 * step < cols; c += 4 * step) {                                      \
                a0 = OP()(a0, row[c]);                                                        \
                a1 = OP()(a1, row[c + step]);                                                 \
                a2 = OP()(a2, row[c + 2 * step]);                                             \
                a3 = OP()(a3, row[c + 3 * step]);                                             \
            }                                                                                 \
            for (; c < cols; c += step) a0 = OP()(a0, row[c]);                                \
            T acc = OP()(OP()(a0, a1), OP()(a2, a3));                                         \
            acc = block_reduce(OP(), acc, (T)(INIT), partial);                                \
            if (threadIdx.x == 0) out[r] = acc;                                               \
        }                                                                                     \
    }
#define F32_INF __int_as_float(0x7f800000)
#define F64_INF __longlong_as_double(0x7ff0000000000000ULL)
REDUCE_ROWS(reduce_sum_f32, float, SumOp, 0.0f)
REDUCE_ROWS(reduce_sum_f64, double, SumOp, 0.0)
REDUCE_ROWS(reduce_sum_i64, long long, SumOp, 0)
REDUCE_ROWS(reduce_max_f32, float, MaxOp, -F32_INF)
REDUCE_ROWS(reduce_max_f64, double, MaxOp, -F64_INF)
REDUCE_ROWS(reduce_max_i64, long long, MaxOp, (-9223372036854775807LL - 1))
REDUCE_ROWS(reduce_min_f32, float, MinOp, F32_INF)
REDUCE_ROWS(reduce_min_f64, double, MinOp, F64_INF)
REDUCE_ROWS(reduce_min_i64, long long, MinOp, 9223372036854775807LL)

// Softmax (log_softmax) of each row of a contiguous [rows, cols] buffer:
// <softmax|log_softmax>_rows_<dtype>. A row of -inf only gives NaN, and +inf or NaN in a row
// make it NaN, as in PyTorch.
#define SOFTMAX_ROWS(NAME, T, LOG_OUT, INF)                                                   \
    extern "C" __global__ void NAME(const T* x, T* out, long long rows, long long cols) {     \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            T* yr = out + r * cols;                                                           \
            T m = -(INF);                                                                     \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = MaxOp()(m, xr[c]); \
            m = block_reduce(MaxOp(), m, (T)(-(INF)), partial);                               \
            if (m == -(INF)) m = T(0);                                                        \
            T s = T(0);                                                                       \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += exp(xr[c] - m);   \
            s = block_reduce(SumOp(), s, T(0), partial);                                      \
            if (LOG_OUT) {                                                                    \
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
SOFTMAX_ROWS(softmax_rows_f32, float, 0, F32_INF)
SOFTMAX_ROWS(softmax_rows_f64, double, 0, F64_INF)
SOFTMAX_ROWS(log_softmax_rows_f32, float, 1, F32_INF)
SOFTMAX_ROWS(log_softmax_rows_f64, double, 1, F64_INF)

// The mean and 1 / sqrt(var + eps) (biased variance, from a second pass) of one row, for the
// whole block.
template <typename T>
__device__ void row_stats(const T* xr, long long cols, double eps, T* partial, T* mean, T* rstd) {
    T s = T(0);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    T m = block_reduce(SumOp(), s, T(0), partial) / T(cols);
    T q = T(0);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        T d = xr[c] - m;
        q += d * d;
    }
    *mean = m;
    *rstd = T(1) / sqrt(block_reduce(SumOp(), q, T(0), partial) / T(cols) + T(eps));
}

// Layer norm of each row of a contiguous [rows, cols] buffer: (x - mean) / sqrt(var + eps)
// (biased variance, from a second pass over the row), then * w + b when `affine` (w and b
// are otherwise not read): layer_norm_rows_<dtype>.
#define LAYER_NORM_ROWS(NAME, T)                                                              \
    extern "C" __global__ void NAME(const T* x, const T* w, const T* b, T* out, long long rows, \
                                    long long cols, double eps, int affine) {                 \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            T* yr = out + r * cols;                                                           \
            T mean, rstd;                                                                     \
            row_stats(xr, cols, eps, partial, &mean, &rstd);                                  \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) {                      \
                T v = (xr[c] - mean) * rstd;                                                  \
                yr[c] = affine ? v * w[c] + b[c] : v;                                         \
            }                                                                                 \
        }                                                                                     \
    }
LAYER_NORM_ROWS(layer_norm_rows_f32, float)
LAYER_NORM_ROWS(layer_norm_rows_f64, double)

// Layer norm's input gradient per row, dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// with g = dy * w (dy without `affine`), into out[0, rows * cols); with `affine`, each row's
// mean and rstd go to stats[2r], stats[2r + 1] for layer_norm_wgrad: layer_norm_grad_rows_<dtype>.
#define LAYER_NORM_GRAD_ROWS(NAME, T)                                                         \
    extern "C" __global__ void NAME(const T* x, const T* w, const T* dy, T* out, T* stats,    \
                                    long long rows, long long cols, double eps, int affine) { \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            const T* gr = dy + r * cols;                                                      \
            T mean, rstd;                                                                     \
            row_stats(xr, cols, eps, partial, &mean, &rstd);                                  \
            T sg = T(0), sgx = T(0);                                                          \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) {                      \
                T g = affine ? gr[c] * w[c] : gr[c];                                          \
                sg += g;                                                                      \
                sgx += g * (xr[c] - mean) * rstd;                                             \
            }                                                                                 \
            T mg = block_reduce(SumOp(), sg, T(0), partial) / T(cols);                        \
            T mgx = block_reduce(SumOp(), sgx, T(0), partial) / T(cols);                      \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) {                      \
                T g = affine ? gr[c] * w[c] : gr[c];                                          \
                T xh = (xr[c] - mean) * rstd;                                                 \
                out[r * cols + c] = rstd * (g - mg - xh * mgx);                               \
            }                                                                                 \
            if (affine && threadIdx.x == 0) {                                                 \
                stats[2 * r] = mean;                                                          \
                stats[2 * r + 1] = rstd;                                                      \
            }                                                                                 \
        }                                                                                     \
    }
LAYER_NORM_GRAD_ROWS(layer_norm_grad_rows_f32, float)
LAYER_NORM_GRAD_ROWS(layer_norm_grad_rows_f64, double)

// Layer norm's weight and bias gradients in two steps, each summing in a fixed order (the
// same result on every run, no atomics): block b of the first takes chunk k of `chunk` rows
// for 256 columns, one thread a column, into part[k * 2 * cols + c] (sum of dy * xhat) and
// part[k * 2 * cols + cols + c] (sum of dy): layer_norm_wgrad_part_<dtype>; the second sums
// the chunks in order, one thread per entry, into out[at + j]: layer_norm_wgrad_sum_<dtype>.
#define LAYER_NORM_WGRAD(PART, SUM, T)                                                        \
    extern "C" __global__ void PART(const T* x, const T* dy, const T* stats, T* part,         \
                                    long long rows, long long cols, long long chunk) {        \
        const long long col_blocks = (cols + blockDim.x - 1) / blockDim.x;                    \
        const long long blocks = col_blocks * ((rows + chunk - 1) / chunk);                   \
        for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {                          \
            const long long k = b / col_blocks;                                               \
            const long long c = (b - k * col_blocks) * blockDim.x + threadIdx.x;              \
            if (c >= cols) continue;                                                          \
            const long long r0 = k * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;       \
            T gw = T(0), gb = T(0);                                                           \
            for (long long r = r0; r < r1; ++r) {                                             \
                T d = dy[r * cols + c];                                                       \
                gw += d * (x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1];                \
                gb += d;                                                                      \
            }                                                                                 \
            part[k * 2 * cols + c] = gw;                                                      \
            part[k * 2 * cols + cols + c] = gb;                                               \
        }                                                                                     \
    }                                                                                         \
    extern "C" __global__ void SUM(const T* part, T* out, long long chunks, long long cols,   \
                                   long long at) {                                            \
        GRID_LOOP(j, 2 * cols) {                                                              \
            T s = T(0);                                                                       \
            for (long long k = 0; k < chunks; ++k) s += part[k * 2 * cols + j];               \
            out[at + j] = s;                                                                  \
        }                                                                                     \
    }
LAYER_NORM_WGRAD(layer_norm_wgrad_part_f32, layer_norm_wgrad_sum_f32, float)
LAYER_NORM_WGRAD(layer_norm_wgrad_part_f64, layer_norm_wgrad_sum_f64, double)

// Cross-entropy of each row of contiguous [rows, cols] logits against its int64 label (in
// range): loss[r] = logsumexp(x_r) - x_r[label_r]: xent_rows_<dtype>.
#define XENT_ROWS(NAME, T, INF)                                                               \
    extern "C" __global__ void NAME(const T* x, const long long* labels, T* loss,             \
                                    long long rows, long long cols) {                         \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            T m = -(INF);                                                                     \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = MaxOp()(m, xr[c]); \
            m = block_reduce(MaxOp(), m, (T)(-(INF)), partial);                               \
            T s = T(0);                                                                       \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += exp(xr[c] - m);   \
            s = block_reduce(SumOp(), s, T(0), partial);                                      \
            if (threadIdx.x == 0) loss[r] = m + log(s) - xr[labels[r]];                       \
        }                                                                                     \
    }
XENT_ROWS(xent_rows_f32, float, F32_INF)
XENT_ROWS(xent_rows_f64, double, F64_INF)

// The logits gradient of the mean cross-entropy, (softmax(x_r) - onehot(label_r)) * dy / rows,
// with dy the element dy[dy_at]: xent_grad_rows_<dtype>.
#define XENT_GRAD_ROWS(NAME, T, INF)                                                          \
    extern "C" __global__ void NAME(const T* x, const long long* labels, const T* dy,         \
                                    long long dy_at, T* out, long long rows, long long cols) { \
        __shared__ T partial[32];                                                             \
        T scale = dy[dy_at] / T(rows);                                                        \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* xr = x + r * cols;                                                       \
            T m = -(INF);                                                                     \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = MaxOp()(m, xr[c]); \
            m = block_reduce(MaxOp(), m, (T)(-(INF)), partial);                               \
            T s = T(0);                                                                       \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += exp(xr[c] - m);   \
            T inv = T(1) / block_reduce(SumOp(), s, T(0), partial);                           \
            long long label = labels[r];                                                      \
            for (long long c = threadIdx.x; c < cols; c += blockDim.x)                        \
                out[r * cols + c] = (exp(xr[c] - m) * inv - (c == label ? T(1) : T(0))) * scale; \
        }                                                                                     \
    }
XENT_GRAD_ROWS(xent_grad_rows_f32, float, F32_INF)
XENT_GRAD_ROWS(xent_grad_rows_f64, double, F64_INF)

// Attention probabilities in place: row r of a contiguous [rows, s] score buffer (query row
// i = r % l of its head) becomes softmax(scale * row), over the first min(i + 1, s) keys
// with `causal` (zeros after them): attn_softmax_rows_<dtype>.
#define ATTN_SOFTMAX_ROWS(NAME, T, INF)                                                       \
    extern "C" __global__ void NAME(T* p, long long rows, long long l, long long s,           \
                                    double scale, int causal) {                               \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            T* pr = p + r * s;                                                                \
            long long i = r % l;                                                              \
            long long n = causal ? (i + 1 < s ? i + 1 : s) : s;                               \
            T sc = T(scale);                                                                  \
            T m = -(INF);                                                                     \
            for (long long c = threadIdx.x; c < n; c += blockDim.x) m = MaxOp()(m, pr[c] * sc); \
            m = block_reduce(MaxOp(), m, (T)(-(INF)), partial);                               \
            if (m == -(INF)) m = T(0);                                                        \
            T sum = T(0);                                                                     \
            for (long long c = threadIdx.x; c < n; c += blockDim.x) sum += exp(pr[c] * sc - m); \
            T inv = T(1) / block_reduce(SumOp(), sum, T(0), partial);                         \
            for (long long c = threadIdx.x; c < s; c += blockDim.x)                           \
                pr[c] = c < n ? exp(pr[c] * sc - m) * inv : T(0);                             \
        }                                                                                     \
    }
ATTN_SOFTMAX_ROWS(attn_softmax_rows_f32, float, F32_INF)
ATTN_SOFTMAX_ROWS(attn_softmax_rows_f64, double, F64_INF)

// The scores' gradient from the probabilities p and their gradient dp, in place in dp:
// dp = p * (dp - sum(p * dp)) * scale, row by row: attn_grad_rows_<dtype>.
#define ATTN_GRAD_ROWS(NAME, T)                                                               \
    extern "C" __global__ void NAME(const T* p, T* dp, long long rows, long long s,           \
                                    double scale) {                                           \
        __shared__ T partial[32];                                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                            \
            const T* pr = p + r * s;                                                          \
            T* gr = dp + r * s;                                                               \
            T d = T(0);                                                                       \
            for (long long c = threadIdx.x; c < s; c += blockDim.x) d += pr[c] * gr[c];       \
            d = block_reduce(SumOp(), d, T(0), partial);                                      \
            for (long long c = threadIdx.x; c < s; c += blockDim.x)                           \
                gr[c] = pr[c] * (gr[c] - d) * T(scale);                                       \
        }                                                                                     \
    }
ATTN_GRAD_ROWS(attn_grad_rows_f32, float)
ATTN_GRAD_ROWS(attn_grad_rows_f64, double)

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

// contiguous cols [n, oh*ow, c, kh*kw] summed into [n, c, h, w]: one thread per output
// element adds the windows that cover it in the CPU's order (window rows, then columns), so
// the result is the same on every run and equal to the CPU's; no atomics.
#define FOLD(NAME, T)                                                                         \
    extern "C" __global__ void NAME(const T* cols, Window g, T* out, long long n) {           \
        GRID_LOOP(i, n) {                                                                     \
            long long kk = g.kh * g.kw, l = g.oh * g.ow;                                      \
            long long iw = i % g.w, ih = (i / g.w) % g.h, ci = (i / (g.w * g.h)) % g.c;       \
            long long ni = i / (g.w * g.h * g.c);                                             \
            const T* base = cols + ni * l * g.c * kk + ci * kk;                               \
            T s = 0;                                                                          \
            for (long long ki = g.kh - 1; ki >= 0; --ki) {                                    \
                long long ty = ih + g.ph - ki * g.dh;                                         \
                if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;                  \
                long long y = ty / g.sh;                                                      \
                for (long long kj = g.kw - 1; kj >= 0; --kj) {                                \
                    long long tx = iw + g.pw - kj * g.dw;                                     \
                    if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;              \
                    s += base[(y * g.ow + tx / g.sw) * g.c * kk + ki * g.kw + kj];            \
                }                                                                             \
            }                                                                                 \
            out[i] = s;                                                                       \
        }                                                                                     \
    }
FOLD(fold_f32, float)
FOLD(fold_f64, double)

// The kernel taps t in [0, k) whose input position base + t * d - pad lies in [0, size):
// [*lo, *hi), found arithmetically (a huge kernel in a huge padding costs nothing).
__device__ __forceinline__ void taps(long long base, long long d, long long pad, long long size,
                                     long long k, long long* lo, long long* hi) {
    long long a = pad - base, b = size + pad - base;
    long long l = a > 0 ? (a + d - 1) / d : 0;
    long long h = b > 0 ? (b + d - 1) / d : 0;
    if (h > k) h = k;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

// Flat h*w position of each max-pooling window's maximum of x [n, c, h, w] (strided), as
// [n, c, oh*ow]: first on ties, NaN wins, -1 for a window entirely in the padding.
#define POOL_ARGMAX(NAME, T)                                                                  \
    extern "C" __global__ void NAME(const T* x, Strided lx, Window g, long long* out,         \
                                    long long n) {                                            \
        GRID_LOOP(i, n) {                                                                     \
            long long l = g.oh * g.ow, p = i % l, plane = i / l;                              \
            long long ni = plane / g.c, ci = plane % g.c, oy = p / g.ow, ox = p % g.ow;       \
            long long base = lx.offset + ni * lx.strides[0] + ci * lx.strides[1];             \
            long long best = -1, ky0, ky1, kx0, kx1;                                          \
            T bv = (T)0;                                                                      \
            taps(oy * g.sh, g.dh, g.ph, g.h, g.kh, &ky0, &ky1);                               \
            taps(ox * g.sw, g.dw, g.pw, g.w, g.kw, &kx0, &kx1);                               \
            for (long long ki = ky0; ki < ky1; ++ki) {                                        \
                long long iy = oy * g.sh + ki * g.dh - g.ph;                                  \
                for (long long kj = kx0; kj < kx1; ++kj) {                                    \
                    long long ix = ox * g.sw + kj * g.dw - g.pw;                              \
                    T v = x[base + iy * lx.strides[2] + ix * lx.strides[3]];                  \
                    if (best < 0 || v > bv || (v != v && bv == bv)) {                         \
                        best = iy * g.w + ix;                                                 \
                        bv = v;                                                               \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            out[i] = best;                                                                    \
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

// ---- fused optimizer steps (`crate::optim`): the parameter and up to three state buffers
// ---- updated in place in one pass, with the CPU's arithmetic in the CPU's order. Products,
// ---- sums and differences are rounded one at a time (never contracted into a fused
// ---- multiply-add), as the composed update's separate ops and the CPU round them.

__device__ __forceinline__ float r_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double r_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float r_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double r_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float r_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double r_sub(double a, double b) { return __dsub_rn(a, b); }

// which optimizer (OptimArgs.kind), its switches (flags) and its constants (c, in float64,
// rounded to the parameter's dtype as on the CPU); must match `crate::optim::GpuStep`
struct OptimArgs {
    int kind;
    int flags;
    double c[10];
};
#define OPT_ADAM 0
#define OPT_SGD 1
#define OPT_RMSPROP 2
#define OPT_ADAGRAD 3
#define OPT_ADADELTA 4
#define OPT_L2 1
#define OPT_DECOUPLED 2
#define OPT_AMSGRAD 4
#define OPT_DAMPENED 8
#define OPT_NESTEROV 16
#define OPT_BUFFER 32
#define OPT_CENTERED 64
#define OPT_DEVICE 128

// With OPT_DEVICE the constants that derive from the learning rate `l` and the step count
// (or SGD's first-step flag) `s` are made here from those device values, in float64 with the
// composed update's operations: Adam's 1 - lr * wd, sqrt(1 - beta2^t) and lr / (1 - beta1^t);
// SGD's lr and (1 - dampening) + dampening * first; Adagrad's lr / (1 + (t - 1) * lr_decay)
// (lr_decay in c[9]); the others' lr.
__device__ __forceinline__ void optim_device_constants(OptimArgs& a, double l, double s) {
    if (a.kind == OPT_ADAM) {
        a.c[5] = r_sub(1.0, r_mul(l, a.c[4]));
        a.c[6] = sqrt(r_sub(1.0, pow(a.c[1], s)));
        a.c[8] = l / r_sub(1.0, pow(a.c[0], s));
    } else if (a.kind == OPT_SGD) {
        a.c[0] = l;
        a.c[3] = r_add(a.c[5], r_mul(a.c[4], s));
    } else if (a.kind == OPT_ADAGRAD) {
        a.c[0] = l / r_add(1.0, r_mul(r_sub(s, 1.0), a.c[9]));
    } else {
        a.c[0] = l;
    }
}

template <typename T>
__device__ __forceinline__ void optim_one(T* p, const T* g, T* s0, T* s1, T* s2, long long i,
                                          const OptimArgs& a) {
    const int f = a.flags;
    T pi = p[i], gi = g[i];
    if (a.kind == OPT_ADAM) {
        // c: beta1, beta2, 1 - beta1, 1 - beta2, weight decay, 1 - lr * wd,
        // sqrt(1 - beta2^t), eps, lr / (1 - beta1^t)
        if (f & OPT_DECOUPLED) pi = r_mul(pi, T(a.c[5]));
        if (f & OPT_L2) gi = r_add(gi, r_mul(T(a.c[4]), pi));
        T m = r_add(r_mul(s0[i], T(a.c[0])), r_mul(T(a.c[2]), gi));
        T v = r_add(r_mul(s1[i], T(a.c[1])), r_mul(T(a.c[3]), r_mul(gi, gi)));
        s0[i] = m;
        s1[i] = v;
        if (f & OPT_AMSGRAD) {
            T x = s2[i];
            v = (v > x || v != v) ? v : x;  // (NaN wins, as `maximum`)
            s2[i] = v;
        }
        p[i] = r_sub(pi, r_mul(T(a.c[8]), m / r_add(sqrt(v) / T(a.c[6]), T(a.c[7]))));
    } else if (a.kind == OPT_SGD) {
        // c: lr, weight decay, momentum, the factor on g added to the buffer
        if (f & OPT_L2) gi = r_add(gi, r_mul(T(a.c[1]), pi));
        if (f & OPT_BUFFER) {
            T add = (f & OPT_DAMPENED) ? r_mul(gi, T(a.c[3])) : gi;
            T b = r_add(r_mul(s0[i], T(a.c[2])), add);
            s0[i] = b;
            T d = (f & OPT_NESTEROV) ? r_add(gi, r_mul(T(a.c[2]), b)) : b;
            p[i] = r_sub(pi, r_mul(T(a.c[0]), d));
        } else {
            p[i] = r_sub(pi, r_mul(T(a.c[0]), gi));
        }
    } else if (a.kind == OPT_RMSPROP) {
        // c: lr, alpha, 1 - alpha, eps, weight decay, momentum; s0 = E[g^2], s1 = the
        // momentum buffer, s2 = E[g]
        if (f & OPT_L2) gi = r_add(gi, r_mul(T(a.c[4]), pi));
        T s = r_add(r_mul(s0[i], T(a.c[1])), r_mul(T(a.c[2]), r_mul(gi, gi)));
        s0[i] = s;
        T avg;
        if (f & OPT_CENTERED) {
            T m = r_add(r_mul(s2[i], T(a.c[1])), r_mul(T(a.c[2]), gi));
            s2[i] = m;
            avg = r_add(sqrt(r_sub(s, r_mul(m, m))), T(a.c[3]));
        } else {
            avg = r_add(sqrt(s), T(a.c[3]));
        }
        if (f & OPT_BUFFER) {
            T b = r_add(r_mul(s1[i], T(a.c[5])), gi / avg);
            s1[i] = b;
            p[i] = r_sub(pi, r_mul(T(a.c[0]), b));
        } else {
            p[i] = r_sub(pi, r_mul(T(a.c[0]), gi / avg));
        }
    } else if (a.kind == OPT_ADAGRAD) {
        // c: the step's lr, eps, weight decay; s0 = the sum of squares
        if (f & OPT_L2) gi = r_add(gi, r_mul(T(a.c[2]), pi));
        T s = r_add(s0[i], r_mul(gi, gi));
        s0[i] = s;
        p[i] = r_sub(pi, r_mul(T(a.c[0]), gi / r_add(sqrt(s), T(a.c[1]))));
    } else {
        // Adadelta; c: lr, rho, 1 - rho, eps, weight decay; s0 = E[g^2], s1 = E[dx^2]
        if (f & OPT_L2) gi = r_add(gi, r_mul(T(a.c[4]), pi));
        T s = r_add(r_mul(s0[i], T(a.c[1])), r_mul(T(a.c[2]), r_mul(gi, gi)));
        s0[i] = s;
        T acc = s1[i];
        T delta = r_mul(sqrt(r_add(acc, T(a.c[3]))) / sqrt(r_add(s, T(a.c[3]))), gi);
        s1[i] = r_add(r_mul(acc, T(a.c[1])), r_mul(T(a.c[2]), r_mul(delta, delta)));
        p[i] = r_sub(pi, r_mul(T(a.c[0]), delta));
    }
}

// One optimizer step over n elements; each buffer from its own offset (an absent state's
// pointer is never read); lr and aux (float64 scalars) are read with OPT_DEVICE only, aux
// only where the optimizer has one: optim_step_<dtype>.
#define OPTIM_STEP(NAME, T)                                                                   \
    extern "C" __global__ void NAME(T* p, long long op, const T* g, long long og, T* s0,     \
                                    long long o0, T* s1, long long o1, T* s2, long long o2,   \
                                    const void* lr, long long lro, const void* aux,           \
                                    long long auxo, long long n, OptimArgs a) {               \
        if (a.flags & OPT_DEVICE) {                                                           \
            const bool has_aux = a.kind == OPT_ADAM || a.kind == OPT_ADAGRAD ||               \
                                 (a.kind == OPT_SGD && (a.flags & OPT_BUFFER));               \
            optim_device_constants(a, ((const double*)lr)[lro],                               \
                                   has_aux ? ((const double*)aux)[auxo] : 0.0);               \
        }                                                                                     \
        GRID_LOOP(i, n) { optim_one(p + op, g + og, s0 + o0, s1 + o1, s2 + o2, i, a); }       \
    }
OPTIM_STEP(optim_step_f32, float)
OPTIM_STEP(optim_step_f64, double)
