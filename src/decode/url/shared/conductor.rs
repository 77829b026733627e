//! The conductor thread (actions): every TICK it measures each source's rate and how long the
//! reader waited, tunes the connections (`schedule::tune`) and starts the threads a source
//! was given.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::super::limit::Limiter;
use super::super::schedule::{self, Pace, Probe, Tune};
use super::{RATE_TICKS, Shared, State, TICK};

impl Shared {
    /// The connections the active sources should have and do not (0..target, and the
    /// standby while under the ceiling), marked alive: the caller starts them.
    pub fn missing(st: &mut State) -> Vec<(usize, usize)> {
        let mut start = Vec::new();
        for (source, s) in st.sources.iter_mut().enumerate() {
            if !s.usable() {
                continue;
            }
            for index in 0..=s.target.min(s.ceiling - 1) {
                if !s.alive.contains(&index) {
                    s.alive.push(index);
                    start.push((source, index));
                }
            }
        }
        start
    }

    /// The conductor: every TICK it measures each source's rate and how long the reader
    /// waited, tunes the connections (`schedule::tune`), starts the connection threads a
    /// source was given (`spawn`), and wakes the connections when the reader waits (a late
    /// head piece may be worth a copy). Ends with the download.
    pub fn conduct(self: &Arc<Self>, spawn: &dyn Fn(&Arc<Shared>, usize, usize) -> bool) {
        let _aside = crate::aside::Aside::enter();
        // (time, the reader's wait so far), over the rate window.
        let mut waits: VecDeque<(f64, f64)> = VecDeque::new();
        loop {
            std::thread::sleep(TICK);
            let mut st = self.lock();
            if st.cancel || st.failed.is_some() {
                return;
            }
            let now = self.now();
            let mut waited = st.waited;
            if let Some(t) = st.waiting_since {
                waited += t.elapsed();
            }
            waits.push_back((now, waited.as_secs_f64()));
            while waits.len() > RATE_TICKS {
                waits.pop_front();
            }
            let (t0, w0) = waits.front().copied().unwrap_or((now, 0.0));
            let starved = (waited.as_secs_f64() - w0) / (now - t0).max(1e-3);
            for (i, s) in st.sources.iter_mut().enumerate() {
                s.samples.push_back((now, s.delivered));
                while s.samples.len() > RATE_TICKS {
                    s.samples.pop_front();
                }
                let (t0, b0) = s.samples.front().copied().unwrap_or((now, s.delivered));
                s.rate = if now > t0 { (s.delivered - b0) as f64 / (now - t0) } else { 0.0 };
                self.stats.sources[i].rate.store(s.rate as u64, Ordering::Relaxed);
            }
            let at = st.window.reader();
            st.reader_samples.push_back((now, at));
            while st.reader_samples.len() > RATE_TICKS {
                st.reader_samples.pop_front();
            }
            if let Some(&(t0, a0)) = st.reader_samples.front()
                && now > t0
                && st.reader_samples.len() == RATE_TICKS
            {
                st.drain = Some((at - a0) as f64 / (now - t0));
            }
            let capped = self.limiter.as_ref().is_some_and(Limiter::limiting);
            let paces: Vec<Pace> = st
                .sources
                .iter()
                .map(|s| Pace {
                    rate: s.rate,
                    target: s.target,
                    ceiling: s.ceiling,
                    usable: s.usable() && s.failures == 0,
                    hold_until: s.hold_until,
                    grow: s.grow,
                    first_byte: s.speed.first_byte,
                })
                .collect();
            // The first measurement needs RATE_TICKS of history.
            let measured = st.sources.iter().any(|s| s.samples.len() >= RATE_TICKS);
            let decision = if measured {
                schedule::tune(now, &paces, st.probe.as_ref(), starved, capped)
            } else {
                Tune::Keep
            };
            let mut start: Vec<(usize, usize)> = Vec::new();
            match decision {
                Tune::Keep => {}
                Tune::Open { source, add } => {
                    let (from, before) = (st.sources[source].target, st.sources[source].rate);
                    st.probe = Some(Probe { source, from, added: add, before, since: now });
                    st.sources[source].target += add;
                }
                Tune::Settle { source, doubled } => {
                    let s = &mut st.sources[source];
                    if doubled {
                        s.grow = (s.grow * 2).min(s.ceiling);
                    }
                    s.hold = schedule::HOLD;
                    st.probe = None;
                }
                Tune::Revert { source, to } => {
                    let s = &mut st.sources[source];
                    s.target = to.max(1);
                    s.grow = 1;
                    s.hold_until = now + s.hold;
                    s.hold = (s.hold * 2.0).min(schedule::HOLD_MAX);
                    st.probe = None;
                }
            }
            start.extend(Self::missing(&mut st));
            let reader_waits = st.waiting_since.is_some();
            let waiters = st.work_waiters > 0;
            drop(st);
            for (source, index) in start {
                if !spawn(self, source, index) {
                    // No thread (ulimit -u): the source keeps what it has.
                    let mut st = self.lock();
                    let s = &mut st.sources[source];
                    s.alive.retain(|&i| i != index);
                    s.target = s.target.min(s.alive.len().max(1));
                }
            }
            if reader_waits && waiters {
                self.work.notify_all();
            }
        }
    }
}
