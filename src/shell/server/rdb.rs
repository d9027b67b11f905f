//! The RDB and AOF I/O a data type's callbacks are given, made safe: a reader and a writer
//! over the server's `RedisModuleIO` for RDB files, `DUMP`/`RESTORE` payloads and full syncs,
//! and the AOF rewrite's command emitter. The module declares `HANDLE_IO_ERRORS`, so a failed
//! read does not end the server: every read and write reports the server's I/O error
//! (`IsIOError`) as an [`IoError`], and the callback gives up (a load then fails cleanly).
//!
//! The `extern "C"` callbacks that receive the raw handle live in the server layer
//! (`datatype`, `snapshot`); they wrap it here and hand the layers above only these types.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr;

use redis_module::raw::{RedisModuleIO, RedisModuleString};

use super::api::Api;

/// The server reported an I/O error on the RDB being read or written (a truncated file, a
/// broken sync connection); what was read so far is not to be trusted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IoError;

/// The RDB being written, lent to one save callback (`rdb_save`, `aux_save2`).
///
/// **Ownership**: the server owns the handle; a writer borrows it for the callback it was
/// made in (`'io`) and can neither keep nor free it.
pub struct RdbWriter<'io> {
    api: &'static Api,
    io: *mut RedisModuleIO,
    _callback: PhantomData<&'io mut RedisModuleIO>,
}

impl RdbWriter<'_> {
    /// Wraps the handle a save callback was given.
    ///
    /// # Safety
    /// `io` must be the live saving handle the server passed to the running callback, and the
    /// writer must not outlive that callback.
    pub unsafe fn new(api: &'static Api, io: *mut RedisModuleIO) -> Self {
        RdbWriter { api, io, _callback: PhantomData }
    }

    /// Writes `bytes` as one string (binary safe, its length first).
    pub fn save_bytes(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        // SAFETY: `io` is the callback's live saving handle (`new`'s contract); the bytes live
        // across the call and the server copies them.
        unsafe {
            (self.api.save_string_buffer)(self.io, bytes.as_ptr().cast::<c_char>(), bytes.len())
        };
        self.check()
    }

    fn check(&self) -> Result<(), IoError> {
        // SAFETY: `io` is the callback's live handle (`new`'s contract).
        match unsafe { (self.api.is_io_error)(self.io) } {
            0 => Ok(()),
            _ => Err(IoError),
        }
    }
}

/// The RDB being read, lent to one load callback (`rdb_load`, `aux_load`).
///
/// **Ownership**: as for [`RdbWriter`]: borrowed for the callback it was made in. What it
/// reads is copied out into Rust-owned memory, and the server's buffer freed at once.
pub struct RdbReader<'io> {
    api: &'static Api,
    io: *mut RedisModuleIO,
    _callback: PhantomData<&'io mut RedisModuleIO>,
}

impl RdbReader<'_> {
    /// Wraps the handle a load callback was given.
    ///
    /// # Safety
    /// `io` must be the live loading handle the server passed to the running callback, and
    /// the reader must not outlive that callback.
    pub unsafe fn new(api: &'static Api, io: *mut RedisModuleIO) -> Self {
        RdbReader { api, io, _callback: PhantomData }
    }

    /// Reads one string written by [`RdbWriter::save_bytes`].
    pub fn load_bytes(&mut self) -> Result<Vec<u8>, IoError> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// Reads one string written by [`RdbWriter::save_bytes`] and lends it to `read` where the
    /// server put it, without a copy (a data type's load reads one per key); the server's
    /// buffer is freed when `read` returns.
    pub fn with_bytes<R>(&mut self, read: impl FnOnce(&[u8]) -> R) -> Result<R, IoError> {
        let mut len = 0usize;
        // SAFETY: `io` is the callback's live loading handle (`new`'s contract).
        let buffer = unsafe { (self.api.load_string_buffer)(self.io, &mut len) };
        // SAFETY: as above.
        let failed = unsafe { (self.api.is_io_error)(self.io) } != 0;
        if buffer.is_null() {
            return Err(IoError);
        }
        let result = if failed {
            Err(IoError)
        } else {
            // SAFETY: the server returned `len` readable bytes at the non-NULL `buffer`, which
            // stays alive until it is freed below, after `read` returned.
            Ok(read(unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) }))
        };
        // SAFETY: `buffer` came from `LoadStringBuffer` (the server's allocator), freed once.
        unsafe { (self.api.free)(buffer.cast()) };
        result
    }
}

/// The AOF being rewritten, lent to one `aof_rewrite` callback: it takes the commands that
/// rebuild a value.
///
/// **Ownership**: as for [`RdbWriter`]: borrowed for the callback it was made in.
pub struct AofWriter<'io> {
    api: &'static Api,
    io: *mut RedisModuleIO,
    _callback: PhantomData<&'io mut RedisModuleIO>,
}

impl AofWriter<'_> {
    /// Wraps the handle an `aof_rewrite` callback was given.
    ///
    /// # Safety
    /// `io` must be the live rewrite handle the server passed to the running callback, and
    /// the writer must not outlive that callback.
    pub unsafe fn new(api: &'static Api, io: *mut RedisModuleIO) -> Self {
        AofWriter { api, io, _callback: PhantomData }
    }

    /// Appends `command key bytes` (the key as the server gave it, `bytes` binary safe).
    ///
    /// # Safety
    /// `key` must be the live key name the server passed to the running callback.
    pub unsafe fn emit_key_bytes(
        &mut self,
        command: &CStr,
        key: *mut RedisModuleString,
        bytes: &[u8],
    ) {
        // SAFETY: `io` is the callback's live handle (`new`'s contract) and `key` its live key
        // name (this function's); "sb" takes a string, then a buffer and its length, all live
        // across the call.
        unsafe {
            (self.api.emit_aof)(
                self.io,
                command.as_ptr(),
                c"sb".as_ptr(),
                key,
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
    }

    /// Appends `command args…`, each argument binary safe. Nothing is written when the
    /// server cannot make the argument strings.
    pub fn emit(&mut self, command: &CStr, args: &[&[u8]]) {
        let strings: Vec<*mut RedisModuleString> = args
            .iter()
            // SAFETY: a NULL context makes a string owned here, freed below; the bytes live
            // across the call.
            .map(|a| unsafe {
                (self.api.create_string)(ptr::null_mut(), a.as_ptr().cast::<c_char>(), a.len())
            })
            .collect();
        if strings.iter().all(|s| !s.is_null()) {
            // SAFETY: `io` is the callback's live handle (`new`'s contract); "v" takes the
            // array of live strings and its length.
            unsafe {
                (self.api.emit_aof)(
                    self.io,
                    command.as_ptr(),
                    c"v".as_ptr(),
                    strings.as_ptr(),
                    strings.len(),
                )
            };
        }
        for s in strings.into_iter().filter(|s| !s.is_null()) {
            // SAFETY: made above with a NULL context, freed once.
            unsafe { (self.api.free_string)(ptr::null_mut(), s) };
        }
    }
}
