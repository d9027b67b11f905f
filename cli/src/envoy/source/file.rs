//! `CONFIG_TYPE=FILE`: every file under `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`,
//! loaded at start (a bad set stops the service) and again on every change under the watched
//! directory (`RUNTIME_WATCH_ROOT`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{ConfigSource, Updates};
use crate::envoy::config::{Config, ConfigError};
use crate::envoy::settings::Settings;

/// The config files the settings point at.
pub struct Files {
    settings: Arc<Settings>,
}

impl Files {
    pub fn new(settings: Arc<Settings>) -> Files {
        Files { settings }
    }

    fn load(&self) -> Result<Config, ConfigError> {
        Config::load_dir(
            &self.settings.config_dir(),
            self.settings.runtime_ignore_dot_files,
            self.settings.merge_domain_config,
        )
    }
}

#[tonic::async_trait]
impl ConfigSource for Files {
    async fn start(self: Box<Self>, updates: Updates) -> Result<(), String> {
        let initial = self.load().map_err(|e| format!("error loading the initial config: {e}"))?;
        tracing::info!(dir = %self.settings.config_dir().display(), "config files");
        let _ = updates.apply(Ok(initial));
        watch(*self, updates);
        Ok(())
    }
}

/// Watches the runtime directory; on a change, reloads every config file: a good set replaces
/// the config in force, a bad one is logged and counted, and the last good config stays.
fn watch(files: Files, updates: Updates) {
    use notify::Watcher;
    let settings = files.settings.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher =
        match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                let _ = tx.send(());
            }
        }) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!("config reload disabled: {e}");
                return;
            }
        };
    let dir = settings.watch_dir();
    if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::Recursive) {
        tracing::error!(dir = %dir.display(), "config reload disabled: cannot watch: {e}");
        return;
    }
    // RUNTIME_WATCH_ROOT: the root is often a symlink swapped to a new tree (`current ->
    // v2`); the swap happens in the root's parent, watched too, and the root's watch is made
    // again after each change so that it follows the link to the new tree.
    let parent = settings
        .runtime_watch_root
        .then(|| dir.parent().map(Path::to_path_buf))
        .flatten()
        .filter(|p| watcher.watch(p, notify::RecursiveMode::NonRecursive).is_ok());
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Let a burst of events (an editor's save, a symlink swap) settle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while rx.try_recv().is_ok() {}
            if parent.is_some() {
                let _ = watcher.unwatch(&dir);
                if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::Recursive) {
                    tracing::error!(dir = %dir.display(), "cannot watch the runtime root again: {e}");
                }
            }
            let _ = updates.apply(files.load());
        }
    });
}
