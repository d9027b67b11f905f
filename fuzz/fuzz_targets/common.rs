//! What every target needs from the host Redis normally provides.
//!
//! The module's global allocator (`redis_module::alloc::RedisAlloc`, installed by the
//! `redis_module!` macro in the library) forwards every Rust allocation to the
//! `RedisModule_Alloc` / `RedisModule_Free` hooks, which Redis fills in when it loads the
//! module and which abort the process while empty. A fuzz binary links that library and so
//! that allocator, with no Redis around: this fills the two hooks with libc's `malloc` and
//! `free` from an ELF constructor, before libFuzzer's `main` and so before any Rust code
//! allocates. The code under test keeps exactly the allocation path it has inside Redis, and
//! the library needs no fuzzing-only build.

use std::os::raw::c_void;

type AllocHook = Option<unsafe extern "C" fn(usize) -> *mut c_void>;
type FreeHook = Option<unsafe extern "C" fn(*mut c_void)>;

extern "C" {
    // The hooks of the Redis module API (redismodule.h), defined by redis-module's C shim.
    static mut RedisModule_Alloc: AllocHook;
    static mut RedisModule_Free: FreeHook;
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

extern "C" fn install_libc_allocator() {
    // SAFETY: runs once, single-threaded, before `main`; nothing reads the hooks yet.
    unsafe {
        RedisModule_Alloc = Some(malloc);
        RedisModule_Free = Some(free);
    }
}

#[used]
#[link_section = ".init_array"]
static INSTALL_LIBC_ALLOCATOR: extern "C" fn() = install_libc_allocator;
