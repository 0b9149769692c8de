//! Where a log is shipped: an object store and a prefix in it, from a URL.

use std::fmt;
use std::net::IpAddr;
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};

use crate::error::{Error, Result};

/// A shipped log's place: a store and the prefix under which `manifest.json` and
/// `segments/` live.
#[derive(Clone)]
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
    conditional_update: bool,
    /// Whether the store asks the instance metadata service for credentials, the
    /// environment naming none.
    instance_credentials: bool,
}

/// Said after a store's error when the environment names no credentials.
const NO_CREDENTIALS: &str = "no AWS credentials are set in the environment, so the instance metadata service was asked for them: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for a store other than AWS)";

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

impl Remote {
    /// The remote named by `url`:
    ///
    /// - `s3://BUCKET/PREFIX`: S3 or an S3-compatible store, with the credentials,
    ///   region and endpoint of the environment as AWS tools read them
    ///   (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    ///   `AWS_REGION`, `AWS_ENDPOINT_URL`). Plain HTTP is allowed for an endpoint on
    ///   a loopback address only (a local test server), unless `AWS_ALLOW_HTTP=true`.
    /// - `file:///PATH` or a plain path: a directory, created if missing.
    ///
    /// # Errors
    ///
    /// [`Error::Url`] for another scheme, a URL without a bucket, or a store that
    /// cannot be set up from the environment.
    pub fn open(url: &str) -> Result<Remote> {
        Remote::open_with(url, true)
    }

    /// The remote named by `url`, to read from: as [`Remote::open`], but a directory
    /// must exist.
    ///
    /// # Errors
    ///
    /// As [`Remote::open`], and [`Error::Url`] for a directory that does not exist.
    pub fn open_existing(url: &str) -> Result<Remote> {
        Remote::open_with(url, false)
    }

    fn open_with(url: &str, create: bool) -> Result<Remote> {
        let refuse = |why: String| Error::Url {
            url: url.to_owned(),
            why,
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(refuse("it names no bucket (s3://BUCKET/PREFIX)".to_owned()));
            }
            let prefix = Path::parse(prefix.trim_end_matches('/'))
                .map_err(|e| refuse(format!("its prefix is not a valid object path: {e}")))?;
            // A store that stops answering fails a pass in a couple of minutes at most,
            // not the client's default of retrying for three; a request may take two
            // (a 16 MiB put over a slow uplink).
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), "120s")
                .with_config(
                    AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                    "5s",
                )
                .with_retry(RetryConfig {
                    backoff: BackoffConfig::default(),
                    max_retries: 3,
                    retry_timeout: Duration::from_secs(60),
                });
            if let Some(endpoint) = endpoint_from_env()
                && is_loopback_http(&endpoint)
            {
                builder = builder.with_endpoint(endpoint).with_allow_http(true);
            }
            let store = builder
                .build()
                .map_err(|e| refuse(format!("the S3 client could not be set up: {e}")))?;
            return Ok(Remote {
                store: Arc::new(store),
                prefix,
                url: url.trim_end_matches('/').to_owned(),
                conditional_update: true,
                instance_credentials: !credentials_in_env(),
            });
        }
        let dir = if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(refuse(
                    "a file URL needs an absolute path (file:///PATH)".to_owned(),
                ));
            }
            path
        } else if url.contains("://") {
            return Err(refuse(
                "only s3://BUCKET/PREFIX, file:///PATH and a plain path are supported".to_owned(),
            ));
        } else {
            url
        };
        if dir.is_empty() {
            return Err(refuse("it names no directory".to_owned()));
        }
        if !create && !FsPath::new(dir).is_dir() {
            return Err(Error::Url {
                url: url.to_owned(),
                why: "there is no such directory".to_owned(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::Io {
            what: "create the shipping directory",
            path: dir.into(),
            source: e,
        })?;
        let store = LocalFileSystem::new_with_prefix(FsPath::new(dir))
            .map_err(|e| refuse(format!("the directory cannot be used: {e}")))?;
        Ok(Remote {
            store: Arc::new(store),
            prefix: Path::default(),
            url: url.trim_end_matches('/').to_owned(),
            conditional_update: false,
            instance_credentials: false,
        })
    }

    /// A remote on a store built elsewhere (a wrapper that counts or fails requests, a
    /// store configured in code), under `prefix`; `url` names it in messages.
    /// `conditional_update` says whether the store supports `PutMode::Update`; without
    /// it the manifest is replaced after a check of its e-tag, which another shipper
    /// can race.
    pub fn with_store(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        url: impl Into<String>,
        conditional_update: bool,
    ) -> Remote {
        Remote {
            store,
            prefix,
            url: url.into(),
            conditional_update,
            instance_credentials: false,
        }
    }

    /// The store's error `e` while doing `what`, with a word on credentials when the
    /// environment named none.
    pub(crate) fn error(&self, what: impl Into<String>, e: object_store::Error) -> Error {
        Error::Store {
            what: what.into(),
            source: Box::new(e),
            hint: self.instance_credentials.then_some(NO_CREDENTIALS),
        }
    }

    /// The URL the remote was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The remote under this one's prefix at `name` (a robot of a fleet), on the same
    /// store and its connections.
    pub fn child(&self, name: &str) -> Remote {
        Remote {
            store: Arc::clone(&self.store),
            prefix: self.prefix.clone().join(name),
            url: format!("{}/{name}", self.url),
            conditional_update: self.conditional_update,
            instance_credentials: self.instance_credentials,
        }
    }

    pub(crate) fn prefix(&self) -> &Path {
        &self.prefix
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        &*self.store
    }

    pub(crate) fn conditional_update(&self) -> bool {
        self.conditional_update
    }

    /// The object path of the manifest.
    pub fn manifest_path(&self) -> Path {
        self.prefix.clone().join("manifest.json")
    }

    /// The object path of the segment named `name`.
    pub fn segment_path(&self, name: &str) -> Path {
        self.prefix.clone().join("segments").join(name)
    }

    /// The URL of the manifest, for messages.
    pub fn manifest_url(&self) -> String {
        format!("{}/manifest.json", self.url)
    }

    /// The URL of a segment's object, for messages.
    pub fn segment_url(&self, name: &str) -> String {
        format!("{}/segments/{name}", self.url)
    }
}

/// Whether the environment names credentials in one of the ways `object_store` reads
/// them (keys, a web identity token, a container's credentials endpoint); without, it
/// asks the instance metadata service.
fn credentials_in_env() -> bool {
    [
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
        || std::env::var("AWS_SKIP_SIGNATURE").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The endpoint the environment names, as AWS tools read it.
fn endpoint_from_env() -> Option<String> {
    ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Whether `endpoint` is `http://` to a loopback address (where plain HTTP is allowed).
fn is_loopback_http(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback_http;

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(is_loopback_http("http://127.0.0.1:5000"));
        assert!(is_loopback_http("http://localhost:9000/"));
        assert!(is_loopback_http("http://[::1]:9000"));
        assert!(!is_loopback_http("http://10.0.0.1:9000"));
        assert!(!is_loopback_http("http://s3.example.com"));
        assert!(!is_loopback_http("https://127.0.0.1:9000"));
    }
}
