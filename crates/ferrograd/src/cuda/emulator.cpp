// A CPU stand-in for the parts of the CUDA runtime that ferrograd's kernels use, built only
// with the `cuda-emulator` feature. It compiles `kernels.cu` unchanged as C++ and runs each
// launch on the host, so the kernels and the Rust code that prepares their arguments, grids and
// buffers can be tested on machines without a GPU.
//
// Kernels that never synchronise run their threads one after another on the calling thread.
// Kernels that do (block barriers, warp shuffles) run every thread of a block as a fiber
// on the calling thread, switched at each barrier, so `__syncthreads` and
// `__shfl_down_sync` behave as on the device. Misuse that is undefined on a GPU (a shuffle in a
// partial warp, a barrier that not every thread reaches) is reported, never given a value.

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// CUDA's math functions take float and double: the <cmath> overloads do the same (an op's
// kernel expression in kernels.cu may call any of them)
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::cbrt;
using std::ceil;
using std::copysign;
using std::cos;
using std::cosh;
using std::erf;
using std::erfc;
using std::exp;
using std::exp2;
using std::expm1;
using std::fabs;
using std::floor;
using std::fmax;
using std::fmin;
using std::fmod;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::nearbyint;
using std::pow;
using std::rint;
using std::round;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
using std::trunc;

struct dim3 {
    unsigned x, y, z;
};

// the running thread's coordinates (one launch runs at a time, on the calling thread)
static dim3 threadIdx{0, 0, 0};
static dim3 blockIdx{0, 0, 0};
static dim3 blockDim{1, 1, 1};
static dim3 gridDim{1, 1, 1};

#define __global__
// arithmetic rounded once per operation (the emulator is built with -ffp-contract=off, so
// plain operators already are)
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dsub_rn(double a, double b) { return a - b; }
#define __device__
#define __forceinline__ inline
// one launch at a time and one block at a time: a static array is the block's shared memory
#define __shared__ static

namespace fgemu {

// A barrier among fibers: the last of `size` arrivals releases the others.
struct Barrier {
    unsigned size = 0, count = 0;
    unsigned long long generation = 0;
};

struct Warp {
    Barrier bar;
    std::uint64_t lanes[32] = {};
};

// Switching between fibers: a few instructions on x86-64 (glibc's swapcontext makes a system
// call per switch, which made reductions a hundred times slower), ucontext elsewhere.
#if defined(__x86_64__)
struct Context {
    void* sp = nullptr;
};
extern "C" void ferrograd_emulator_switch(void** save_sp, void* next_sp);
asm(R"(
    .pushsection .text
    .globl ferrograd_emulator_switch
    .type ferrograd_emulator_switch, @function
ferrograd_emulator_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ferrograd_emulator_switch, .-ferrograd_emulator_switch
    .popsection
)");
static void switch_to(Context& from, Context& to) { ferrograd_emulator_switch(&from.sp, to.sp); }
static void start(Context& c, char* stack, std::size_t size, void (*entry)()) {
    // as if `entry` had been called: its return address slot (never used) at a 16-byte
    // boundary + 8, under it the address the first switch returns to and six saved registers
    auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(entry);
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    c.sp = sp;
}
#else
#include <ucontext.h>
struct Context {
    ucontext_t uc;
};
static void switch_to(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
static void start(Context& c, char* stack, std::size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
#endif

struct Fibers {
    Context scheduler;
    std::vector<Context> ctx;
    std::vector<bool> done;
    std::vector<unsigned> block_of;  // the block each fiber is in
    unsigned long long events = 0;   // arrivals at barriers and ends, to tell progress
    Barrier block;
    std::vector<Warp> warps;
    unsigned current = 0;
};

static Fibers* fibers = nullptr;  // set while a synchronising kernel runs

[[noreturn]] static void fail(const char* what) {
    if (!fibers) throw std::runtime_error(what);
    // inside a fiber nothing can unwind to the launch
    std::fprintf(stderr, "ferrograd CUDA emulator: %s\n", what);
    std::abort();
}

static void wait(Barrier& b) {
    unsigned long long gen = b.generation;
    ++fibers->events;
    if (++b.count == b.size) {
        b.count = 0;
        ++b.generation;
        return;
    }
    while (b.generation == gen) switch_to(fibers->ctx[fibers->current], fibers->scheduler);
}

}  // namespace fgemu

inline void __syncthreads() {
    if (!fgemu::fibers) fgemu::fail("__syncthreads in a kernel the emulator runs without fibers");
    fgemu::wait(fgemu::fibers->block);
}

template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t), "shuffle of a value wider than 8 bytes");
    if (!fgemu::fibers) fgemu::fail("warp shuffle in a kernel the emulator runs without fibers");
    fgemu::Warp& w = fgemu::fibers->warps[threadIdx.x / 32];
    unsigned lane = threadIdx.x % 32;
    if (mask != 0xffffffffu || w.bar.size != 32)
        fgemu::fail("warp shuffle with a full mask in a partial warp (undefined on the device)");
    std::memcpy(&w.lanes[lane], &v, sizeof(T));
    fgemu::wait(w.bar);
    T r = v;
    if (lane + delta < 32) std::memcpy(&r, &w.lanes[lane + delta], sizeof(T));
    fgemu::wait(w.bar);
    return r;
}

template <typename T> inline T atomicAdd(T* p, T v) {
    return std::atomic_ref<T>(*p).fetch_add(v);
}

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

inline double __longlong_as_double(long long i) {
    double d;
    std::memcpy(&d, &i, sizeof d);
    return d;
}

#include "kernels.cu"

namespace fgemu {

template <typename... A, std::size_t... I>
static void call(void (*k)(A...), void** args, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

struct Entry {
    int nargs;
    std::function<void(void**)> run;
};

template <typename... A> static Entry entry(void (*k)(A...)) {
    return {int(sizeof...(A)), [k](void** a) { call(k, a, std::index_sequence_for<A...>{}); }};
}

static const std::map<std::string, Entry>& table() {
    static const std::map<std::string, Entry> t = {
#define FG_KERNEL(name) {#name, entry(&name)},
#include "emulator_kernels.inc"
#undef FG_KERNEL
    };
    return t;
}

// kernels that use block barriers or warp shuffles
static bool synchronises(const std::string& name) {
    for (const char* prefix : {"reduce_", "softmax_rows", "log_softmax_rows", "layer_norm_rows",
                               "layer_norm_grad_rows", "xent_", "attn_"})
        if (name.rfind(prefix, 0) == 0) return true;
    return false;
}

static std::mutex one_launch_at_a_time;

static const Entry* fiber_kernel = nullptr;
static void** fiber_args = nullptr;

static void fiber_main() {
    Fibers& f = *fibers;
    unsigned t = f.current;
    for (unsigned b = 0; b < gridDim.x; ++b) {
        f.block_of[t] = b;
        blockIdx = {b, 0, 0};
        fiber_kernel->run(fiber_args);
        wait(f.block);  // the next block reuses the shared arrays
    }
    f.done[t] = true;
    ++f.events;
    switch_to(f.ctx[t], f.scheduler);  // never resumed
}

static void run_fibers(const Entry& e, void** args) {
    const unsigned bx = blockDim.x;
    // stacks are kept from launch to launch (one launch runs at a time)
    static std::vector<std::unique_ptr<char[]>> stacks;
    const std::size_t stack = 128 * 1024;
    while (stacks.size() < bx) stacks.emplace_back(new char[stack]);
    Fibers f;
    f.ctx.resize(bx);
    f.done.assign(bx, false);
    f.block_of.assign(bx, 0);
    f.block.size = bx;
    f.warps.resize((bx + 31) / 32);
    for (unsigned i = 0; i < f.warps.size(); ++i) f.warps[i].bar.size = std::min(32u, bx - 32 * i);
    for (unsigned t = 0; t < bx; ++t) {
        start(f.ctx[t], stacks[t].get(), stack, fiber_main);
    }
    fibers = &f;
    fiber_kernel = &e;
    fiber_args = args;
    unsigned finished = 0;
    while (finished < bx) {
        // one round: every live fiber runs until it waits on a barrier or ends
        unsigned long long before = f.events;
        finished = 0;
        for (unsigned t = 0; t < bx; ++t) {
            if (f.done[t]) {
                ++finished;
                continue;
            }
            f.current = t;
            threadIdx = {t, 0, 0};
            blockIdx = {f.block_of[t], 0, 0};
            switch_to(f.scheduler, f.ctx[t]);
        }
        if (f.events == before && finished < bx) {
            fibers = nullptr;
            throw std::runtime_error("threads wait on barriers that can never complete "
                                     "(a barrier inside divergent code)");
        }
    }
    fibers = nullptr;
}

}  // namespace fgemu

// Runs kernel `name` over a grid of `grid` blocks of `block` threads (x only). `args` holds one
// pointer per kernel parameter, pointing at the parameter's value, as cuLaunchKernel takes
// them. Returns 0, or writes a message to `err` and returns nonzero.
extern "C" int ferrograd_emulator_launch(const char* name, const unsigned* grid,
                                         const unsigned* block, unsigned shared_bytes,
                                         void** args, int nargs, char* err,
                                         std::size_t err_len) {
    auto say = [&](const std::string& m) {
        std::snprintf(err, err_len, "%s", m.c_str());
        return 1;
    };
    const auto& t = fgemu::table();
    auto it = t.find(name);
    if (it == t.end()) return say(std::string("no kernel named ") + name);
    if (it->second.nargs != nargs)
        return say(std::string(name) + " takes " + std::to_string(it->second.nargs) +
                   " arguments, the launch passed " + std::to_string(nargs));
    if (grid[0] == 0 || grid[1] != 1 || grid[2] != 1 || block[0] == 0 || block[0] > 1024 ||
        block[1] != 1 || block[2] != 1)
        return say(std::string(name) + ": the emulator runs 1-D grids of 1 to 1024 threads per block");
    if (shared_bytes != 0) return say(std::string(name) + ": dynamic shared memory is not emulated");
    std::lock_guard<std::mutex> guard(fgemu::one_launch_at_a_time);
    blockDim = {block[0], 1, 1};
    gridDim = {grid[0], 1, 1};
    try {
        if (fgemu::synchronises(name)) {
            fgemu::run_fibers(it->second, args);
        } else {
            for (unsigned b = 0; b < grid[0]; ++b) {
                for (unsigned th = 0; th < block[0]; ++th) {
                    blockIdx = {b, 0, 0};
                    threadIdx = {th, 0, 0};
                    it->second.run(args);
                }
            }
        }
    } catch (const std::exception& ex) {
        return say(std::string(name) + ": " + ex.what());
    }
    return 0;
}
