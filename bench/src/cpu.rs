//! The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): what the
//! component-vs-native ratio is measured in. A component runs on the calling
//! thread (wasmtime's synchronous calls), so its guest code, the crossing and
//! the host's checks all count, and time the thread spends preempted on a
//! shared machine does not. Owns that one clock; never any other timing.

use std::time::Duration;

/// CPU time the calling thread has used so far.
pub fn thread_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // every Linux and macOS libc knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_cpu_time_moves_with_work_on_this_thread() {
        let before = super::thread_now();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(super::thread_now() > before, "{x}");
    }
}
