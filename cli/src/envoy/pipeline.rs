//! Implicit pipelining: concurrent calls to one Redis server share its writes, so the server
//! reads many commands at once — its cost per request is mostly socket work (a read and a
//! write per batch of commands, not per command).
//!
//! A server's `REDIS_POOL_SIZE` connections are multiplexed (the redis crate's): each write
//! carries every command queued on the connection when it writes. Calls **fill the first
//! connection with room** (fewer than `REDIS_PIPELINE_LIMIT` calls in flight; no bound by
//! default, so one connection carries them all) rather than taking the connections in turn:
//! concurrent calls queue on the same connection and share its writes, with no wait.
//! `REDIS_PIPELINE_WINDOW` above 0: a call waits up to the window for others (at most
//! `REDIS_PIPELINE_LIMIT`: a full batch is written at once) and they are sent as one pipeline,
//! one write (tokio's timer: the window is rounded up to the next millisecond). A call is
//! sent once: a pipeline that fails answers each of its calls with the error, none retried.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Value;
use tokio::sync::{oneshot, OnceCell};

use super::backend::CallError;
use super::redis_shape::classify;
use super::settings::Pipelining;

type Reply = Result<Value, CallError>;

/// One server's connections, and how calls share their writes.
pub struct Pool {
    client: redis::Client,
    config: ConnectionManagerConfig,
    connections: Vec<Connection>,
    pipelining: Pipelining,
    /// With a window: the calls waiting to be written together.
    pending: Mutex<Option<Batch>>,
    batches: AtomicU64,
}

/// A multiplexed connection (made on first use, reconnecting by itself) and the calls in
/// flight on it.
struct Connection {
    manager: OnceCell<ConnectionManager>,
    in_flight: AtomicUsize,
}

/// Calls waiting for the window's end (or the limit) to be written as one pipeline.
struct Batch {
    id: u64,
    pipe: redis::Pipeline,
    replies: Vec<oneshot::Sender<Reply>>,
}

/// `n` calls counted in flight on a connection while this lives.
struct InFlight<'a> {
    count: &'a AtomicUsize,
    n: usize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(self.n, Ordering::Relaxed);
    }
}

impl Pool {
    pub fn new(
        client: redis::Client,
        config: ConnectionManagerConfig,
        size: usize,
        pipelining: Pipelining,
    ) -> Pool {
        let connections = (0..size.max(1))
            .map(|_| Connection { manager: OnceCell::new(), in_flight: AtomicUsize::new(0) })
            .collect();
        Pool {
            client,
            config,
            connections,
            pipelining,
            pending: Mutex::new(None),
            batches: AtomicU64::new(0),
        }
    }

    /// The connections calls can reach: all of them with a limit, else the first.
    pub fn usable(&self) -> usize {
        if self.pipelining.limit == 0 {
            1
        } else {
            self.connections.len()
        }
    }

    /// Opens every usable connection (a `PING` on each).
    pub async fn warm_up(&self) -> Result<(), CallError> {
        for connection in self.connections.iter().take(self.usable()) {
            let mut manager = self.open(connection).await?;
            redis::cmd("PING").query_async::<Value>(&mut manager).await.map_err(classify)?;
        }
        Ok(())
    }

    async fn open(&self, connection: &Connection) -> Result<ConnectionManager, CallError> {
        connection
            .manager
            .get_or_try_init(|| {
                ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
            })
            .await
            .cloned()
            .map_err(|e| CallError::Unavailable(e.to_string()))
    }

    /// The connection for `n` calls: the first with room for them, else the least busy; they
    /// count as in flight on it while the guard lives.
    async fn connection(&self, n: usize) -> Result<(ConnectionManager, InFlight<'_>), CallError> {
        let limit = self.pipelining.limit;
        let mut chosen = None;
        let mut least = usize::MAX;
        for connection in &self.connections {
            let busy = connection.in_flight.load(Ordering::Relaxed);
            if limit == 0 || busy.saturating_add(n) <= limit {
                chosen = Some(connection);
                break;
            }
            if busy < least {
                least = busy;
                chosen = Some(connection);
            }
        }
        let connection =
            chosen.ok_or_else(|| CallError::Unavailable("no Redis connection".into()))?;
        connection.in_flight.fetch_add(n, Ordering::Relaxed);
        let guard = InFlight { count: &connection.in_flight, n };
        Ok((self.open(connection).await?, guard))
    }

    /// Runs one command, sharing a write with the calls made meanwhile.
    pub async fn query(self: &Arc<Self>, cmd: &redis::Cmd) -> Reply {
        if self.pipelining.window.is_zero() {
            let (mut manager, _in_flight) = self.connection(1).await?;
            return cmd.query_async(&mut manager).await.map_err(classify);
        }
        let (reply, answer) = oneshot::channel();
        let full = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let batch = pending.get_or_insert_with(|| {
                let id = self.batches.fetch_add(1, Ordering::Relaxed);
                self.clone().write_after_window(id);
                Batch { id, pipe: redis::pipe(), replies: Vec::new() }
            });
            batch.pipe.add_command(cmd.clone());
            batch.replies.push(reply);
            let limit = self.pipelining.limit;
            if limit > 0 && batch.replies.len() >= limit {
                pending.take()
            } else {
                None
            }
        };
        if let Some(batch) = full {
            tokio::spawn(self.clone().write(batch));
        }
        answer.await.unwrap_or_else(|_| Err(CallError::Unavailable("pipeline dropped".into())))
    }

    /// At the window's end, writes batch `id` if the limit has not written it already.
    fn write_after_window(self: Arc<Self>, id: u64) {
        tokio::spawn(async move {
            tokio::time::sleep(self.pipelining.window).await;
            let batch = {
                let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                match pending.as_ref() {
                    Some(batch) if batch.id == id => pending.take(),
                    _ => None,
                }
            };
            if let Some(batch) = batch {
                self.write(batch).await;
            }
        });
    }

    /// Sends a batch as one pipeline and answers each of its calls.
    async fn write(self: Arc<Self>, batch: Batch) {
        let n = batch.replies.len();
        let result = match self.connection(n).await {
            Ok((mut manager, _in_flight)) => {
                manager.send_packed_commands(&batch.pipe, 0, n).await.map_err(classify)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(values) => {
                let mut values = values.into_iter();
                for reply in batch.replies {
                    let answer = match values.next() {
                        Some(value) => value.extract_error().map_err(classify),
                        None => Err(CallError::Unavailable("a pipelined reply is missing".into())),
                    };
                    let _ = reply.send(answer);
                }
            }
            Err(e) => {
                for reply in batch.replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}
