//! The threads that serve the decoding thread stand aside for it: writers and a download's
//! connection threads run under `SCHED_BATCH` while they work (`Aside`), so a wake-up of
//! theirs (a batch of ops, an io_uring completion, a socket's data) does not preempt the
//! decoder, the run's critical path, when every CPU is busy.
//!
//! Why: on two CPUs a download from a local server keeps both busy (the decoder, the
//! connection thread, the kernel's network work, the server), and Linux placed the woken
//! writer on the decoder's CPU and ran it at once: `perf record -e sched:sched_switch` of one
//! run (596 MB Agave-shaped archive, uncapped nginx on 127.0.0.1, RAM-backed ext4) counted
//! 2,435 preemptions of the decoder, 1,281 of them by the writer on the calling thread; under
//! SCHED_BATCH 444. Extract + sync, 12 interleaved rounds (docs/PERFORMANCE.md): the URL run
//! over the local file went from 1.22x to 1.15x; the local file 0.98x of itself without it.
//! A batch thread still gets its share of the CPU (the same weight, its nice value kept); it
//! only waits for the running thread's slice instead of cutting it short, and on a machine
//! with an idle CPU it runs there at once.
//!
//! Only a thread under the default policy (SCHED_OTHER) is changed, and back when the `Aside`
//! is dropped: a program's thread that runs a restore (the writer on the calling thread) keeps
//! its own policy afterwards, and a real-time, idle or batch thread is left as it is. Where
//! the call is refused (a seccomp filter), nothing changes and nothing is said. What a batch
//! thread starts inherits the policy, as children do: io_uring's io-wq workers (they write
//! for the writer; idle ones end after a few seconds) and a `credential_process` started by a
//! connection thread.

/// A thread under SCHED_BATCH until this is dropped (see the module's words).
pub struct Aside {
    /// The policy to put back (None: nothing was changed).
    was: Option<libc::c_int>,
}

impl Aside {
    /// The calling thread stands aside for the decoder while the value lives.
    #[must_use = "the thread goes back to its policy when this is dropped"]
    pub fn enter() -> Aside {
        Aside { was: set(libc::SCHED_BATCH) }
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        if let Some(was) = self.was {
            let _ = set(was);
        }
    }
}

/// The calling thread's policy (SCHED_RESET_ON_FORK or'd in when set; -1 on failure). The
/// system calls are made directly: musl's `sched_getscheduler` and `sched_setscheduler` are
/// stubs that fail with ENOSYS (POSIX has them act on a process, Linux on a thread), and the
/// static binary is built with musl.
fn policy() -> libc::c_int {
    // Safety: no pointers; 0 names the calling thread.
    let got = unsafe { libc::syscall(libc::SYS_sched_getscheduler, 0) };
    libc::c_int::try_from(got).unwrap_or(-1)
}

/// Moves the calling thread from SCHED_OTHER to `to` (or back to SCHED_OTHER from the policy
/// we set): the policy it had when it changed, None when it was not SCHED_OTHER (or back) or
/// the call failed. A thread someone else moved meanwhile (to SCHED_IDLE, say) is left there.
fn set(to: libc::c_int) -> Option<libc::c_int> {
    let now = policy();
    let ours = now == libc::SCHED_OTHER || now == libc::SCHED_BATCH;
    if !ours || now == to {
        return None;
    }
    // The kernel's `struct sched_param` is one int: the priority, 0 for both policies (the
    // nice value is kept).
    let priority: libc::c_int = 0;
    // Safety: a pointer to an int that outlives the call, as the kernel reads it; 0 is the
    // calling thread.
    let done = unsafe {
        libc::syscall(libc::SYS_sched_setscheduler, 0, to, &priority as *const libc::c_int)
    } == 0;
    done.then_some(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own: the policy is the thread's, and an idle one cannot come back.
    fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("test thread")
    }

    #[test]
    fn batch_while_held_and_back_after() {
        let seen = on_a_thread(|| {
            let before = policy();
            let during = {
                let _aside = Aside::enter();
                policy()
            };
            (before, during, policy())
        });
        assert_eq!(seen, (libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_OTHER));
    }

    #[test]
    fn nested_asides_restore_once() {
        let seen = on_a_thread(|| {
            let outer = Aside::enter();
            let inner = Aside::enter();
            drop(inner);
            let between = policy();
            drop(outer);
            (between, policy())
        });
        assert_eq!(seen, (libc::SCHED_BATCH, libc::SCHED_OTHER));
    }

    #[test]
    fn another_policy_is_left_alone() {
        let seen = on_a_thread(|| {
            let priority: libc::c_int = 0;
            // Safety: as in `set`.
            let r = unsafe {
                libc::syscall(libc::SYS_sched_setscheduler, 0, libc::SCHED_IDLE, &priority)
            };
            assert_eq!(r, 0);
            let during = {
                let _aside = Aside::enter();
                policy()
            };
            (during, policy())
        });
        assert_eq!(seen, (libc::SCHED_IDLE, libc::SCHED_IDLE));
    }
}
