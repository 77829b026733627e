//! The pipeline: a decoder thread turns the input into ops whose file data sits in pool
//! buffers; the calling thread hands the ops to the writer. Data flows one way; only used
//! buffers come back (by being dropped into the pool).

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread;

use anyhow::{Context, Result, anyhow};

use crate::archive::{Kind, Member, Reader};
use crate::config::Config;
use crate::decode;
use crate::plan::{Entry, Op};
use crate::pool::Pool;
use crate::report;
use crate::safety::{Sanitizer, Verdict};
use crate::write::{self, Stats};

/// Ops queued between the threads beyond those holding pool buffers (which the pool bounds):
/// enough to keep the writer busy through a run of directories and links.
const OP_QUEUE: usize = 1024;

pub struct Summary {
    pub stats: Stats,
    pub members: u64,
}

pub fn run(cfg: &Config) -> Result<Summary> {
    let input = decode::open(cfg.archive.as_deref())?;
    let pool = Pool::new(cfg.buf_size, cfg.buf_count);
    let mut writer = write::create(cfg, &pool)?;
    let (tx, rx) = sync_channel::<Op>(OP_QUEUE);

    thread::scope(|s| {
        let producer = s.spawn(|| produce(cfg, input.reader, &pool, tx));
        let written = consume(&mut *writer, rx);
        // The writer is done with the channel (finished, or failed and dropped its receiver,
        // which makes the producer's next send fail); the producer stops either way.
        let produced = producer.join().unwrap_or_else(|_| Err(anyhow!("decoder thread panicked")));
        let finished = writer.finish();
        match (produced, written, finished) {
            (Ok(members), Ok(()), Ok(stats)) => Ok(Summary { stats, members }),
            // A write failure is the root cause when both sides failed: the producer only
            // saw a closed channel.
            (_, Err(e), _) => Err(e),
            (Err(e), Ok(()), _) => Err(e),
            (Ok(_), Ok(()), Err(e)) => Err(e),
        }
    })
}

/// Feeds ops to the writer. While no op is waiting, the writer reaps completions instead of
/// blocking: the producer may be waiting for a pool buffer that only a reaped write returns.
fn consume(writer: &mut dyn write::Writer, rx: Receiver<Op>) -> Result<()> {
    loop {
        match rx.try_recv() {
            Ok(op) => writer.apply(op)?,
            Err(TryRecvError::Empty) => {
                if !writer.progress()? {
                    match rx.recv() {
                        Ok(op) => writer.apply(op)?,
                        Err(_) => return Ok(()),
                    }
                }
            }
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
    }
}

/// Marks a send to a writer that has stopped: the writer's own error explains why.
struct WriterGone;

/// Reads members, judges their paths and sends the ops. Returns the number of members.
fn produce(
    cfg: &Config,
    input: Box<dyn std::io::Read + Send>,
    pool: &Pool,
    tx: SyncSender<Op>,
) -> Result<u64> {
    let mut reader = Reader::new(input);
    let mut sanitizer = Sanitizer::new(cfg.strip_components);
    let mut members = 0;
    while let Some(member) = reader.next_member()? {
        members += 1;
        match produce_member(cfg, &mut reader, &mut sanitizer, pool, &tx, member) {
            Ok(()) => {}
            Err(MemberError::Gone(WriterGone)) => return Ok(members),
            Err(MemberError::Read(e)) => return Err(e),
        }
    }
    Ok(members)
}

enum MemberError {
    Gone(WriterGone),
    Read(anyhow::Error),
}

impl From<anyhow::Error> for MemberError {
    fn from(e: anyhow::Error) -> Self {
        MemberError::Read(e)
    }
}

fn produce_member<R: std::io::Read>(
    cfg: &Config,
    reader: &mut Reader<R>,
    sanitizer: &mut Sanitizer,
    pool: &Pool,
    tx: &SyncSender<Op>,
    m: Member,
) -> Result<(), MemberError> {
    let send = |op: Op| tx.send(op).map_err(|_| MemberError::Gone(WriterGone));
    let name = m.display_name();
    let path = match sanitizer.judge(&m.name) {
        Verdict::Extract(p) => p,
        Verdict::Nothing => return Ok(()),
        Verdict::Refuse(why) => {
            report::skipped(&name, why);
            return Ok(());
        }
    };
    if path.as_path().as_os_str().is_empty() && m.kind != Kind::Dir {
        report::skipped(&name, "member name is empty; skipped");
        return Ok(());
    }
    if cfg.verbose > 0 {
        println!("{name}");
    }
    let owner = cfg.same_owner.then(|| {
        (u32::try_from(m.uid).unwrap_or(u32::MAX - 1), u32::try_from(m.gid).unwrap_or(u32::MAX - 1))
    });
    let entry =
        Entry { name, path, mode: m.mode & 0o7777, mtime: m.mtime, owner, offset: m.offset };
    match m.kind {
        Kind::Dir => send(Op::Dir(entry)),
        Kind::Symlink => send(Op::Symlink { entry, target: m.link_name }),
        Kind::Hardlink => match sanitizer.judge(&m.link_name) {
            Verdict::Extract(target) if !target.as_path().as_os_str().is_empty() => {
                send(Op::Hardlink { entry, target })
            }
            _ => {
                report::skipped(&entry.name, "hard link target is unsafe or empty; skipped");
                Ok(())
            }
        },
        Kind::Fifo => send(Op::Fifo(entry)),
        Kind::CharDev | Kind::BlockDev => {
            report::skipped(&entry.name, "device nodes are not extracted; skipped");
            Ok(())
        }
        Kind::Other(flag) => {
            report::skipped(
                &entry.name,
                format!("unsupported member type '{}'; skipped", flag as char),
            );
            Ok(())
        }
        Kind::File => {
            let name = entry.name.clone();
            send(Op::File { entry, size: m.size, sparse: m.sparse.is_some() })?;
            loop {
                let mut buf = pool.get();
                let got = reader.read_data(buf.full_mut()).with_context(|| {
                    format!("{name}: extraction stopped; the file is left incomplete")
                })?;
                let Some((offset, n)) = got else { break };
                buf.set_len(n);
                send(Op::Data { offset, buf })?;
            }
            send(Op::End)
        }
    }
}
