//! Where the rate-limit config comes from, behind one seam ([`ConfigSource`]): the YAML files
//! under the runtime directory ([`file`], `CONFIG_TYPE=FILE`) or an xDS server ([`xds`],
//! `CONFIG_TYPE=GRPC_XDS_SOTW`). A source hands every config it gets, or the error that kept
//! it from loading, to [`Updates`], which puts it in force (or counts the error and keeps the
//! last good config) the same way whatever the source.

mod file;
mod xds;

use std::sync::Arc;

use super::config::{Config, ConfigError};
use super::service::State;
use super::settings::{ConfigType, SettingError, Settings};

/// Puts configs in force: the one place a new config (or a failed load) lands.
#[derive(Clone)]
pub struct Updates {
    state: Arc<State>,
    set_health: Arc<dyn Fn(bool) + Send + Sync>,
}

impl Updates {
    pub fn new(state: Arc<State>, set_health: Arc<dyn Fn(bool) + Send + Sync>) -> Updates {
        Updates { state, set_health }
    }

    /// A loaded config replaces the one in force (`config_load_success`); an error is logged
    /// and counted (`config_load_error`) and the last good config stays. Returns the error.
    pub fn apply(&self, loaded: Result<Config, ConfigError>) -> Result<(), ConfigError> {
        match loaded {
            Ok(config) => {
                tracing::info!(files = config.files.len(), "config loaded");
                self.state.set_config(config);
                self.state.metrics.config_load_success.inc();
                (self.set_health)(true);
                Ok(())
            }
            Err(e) => {
                tracing::error!("error loading new configuration, the last good one stays: {e}");
                self.state.metrics.config_load_error.inc();
                Err(e)
            }
        }
    }
}

/// A source of configs.
#[tonic::async_trait]
pub trait ConfigSource: Send {
    /// Puts the first config in force through `updates` and keeps watching for new ones
    /// (in a task of its own). Returns when the service may serve; an error stops the service
    /// at start.
    async fn start(self: Box<Self>, updates: Updates) -> Result<(), String>;
}

/// The source `CONFIG_TYPE` names.
pub fn from_settings(settings: &Arc<Settings>) -> Result<Box<dyn ConfigSource>, SettingError> {
    Ok(match &settings.config_type {
        ConfigType::File => Box::new(file::Files::new(settings.clone())),
        ConfigType::Xds(xds) => Box::new(xds::Xds::new(
            (**xds).clone(),
            settings.merge_domain_config,
            settings.force_start_without_initial_config,
        )?),
    })
}
