//! A full, consistent list of one kind, read page by page.

use std::collections::HashSet;

use crate::api::ListMeta;
use crate::client::{Canceller, Error, ListParams};

use super::ListerWatcher;

/// Every object of one list, and the collection version to watch from.
pub struct Listed<K> {
    /// The objects, in server order.
    pub items: Vec<K>,
    /// The list's resourceVersion.
    pub resource_version: String,
}

/// Lists everything in pages of `page_size` (0: one unpaginated request), following
/// `continue` tokens. Answers `Ok(None)` once `cancel` is cancelled (it also ends a
/// request in flight).
///
/// No `resourceVersion` is sent, so the server answers from etcd (a consistent read),
/// never from a watch cache that may lag behind or, after a restore, run ahead.
pub fn list_all<K: 'static>(
    lw: &dyn ListerWatcher<K>,
    page_size: u32,
    label_selector: Option<&str>,
    cancel: &Canceller,
) -> Result<Option<Listed<K>>, Error> {
    let mut items = Vec::new();
    let listed = paginate(page_size, label_selector, cancel, &mut |params| {
        if params.continue_token.is_none() {
            // The first page, or the start of the retry in one request.
            items.clear();
        }
        let page = lw.list(params, cancel)?;
        items.extend(page.items);
        Ok(page.metadata)
    })?;
    Ok(listed.map(|resource_version| Listed {
        items,
        resource_version,
    }))
}

/// The paging of [`list_all`] without the kind: `page` reads one page (keeping its items)
/// and answers its list metadata; answers the list's resourceVersion, `None` once cancelled.
fn paginate(
    page_size: u32,
    label_selector: Option<&str>,
    cancel: &Canceller,
    page: &mut dyn FnMut(&ListParams) -> Result<ListMeta, Error>,
) -> Result<Option<String>, Error> {
    let result = match pages(page_size, label_selector, cancel, page) {
        // The snapshot behind a continue token is compacted away after a few minutes
        // (410 Expired): start again in one request, as client-go's pager does.
        Err(PageError {
            error,
            had_continue: true,
        }) if error.is_gone() && page_size != 0 => {
            log::info!(
                "continue token expired during a paginated list; listing again without pages"
            );
            pages(0, label_selector, cancel, page).map_err(|e| e.error)
        }
        other => other.map_err(|e| e.error),
    };
    match result {
        Err(Error::Cancelled) => Ok(None),
        other => other,
    }
}

struct PageError {
    error: Error,
    had_continue: bool,
}

fn pages(
    page_size: u32,
    label_selector: Option<&str>,
    cancel: &Canceller,
    page: &mut dyn FnMut(&ListParams) -> Result<ListMeta, Error>,
) -> Result<Option<String>, PageError> {
    let mut token: Option<String> = None;
    // Every token handed out so far: a server cycling through tokens (A, B, A, ...)
    // would have us loop forever, the item list growing without bound.
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let params = ListParams {
            limit: (page_size > 0).then_some(page_size),
            continue_token: token.clone(),
            resource_version: None,
            label_selector: label_selector.map(str::to_string),
            field_selector: None,
        };
        let meta = page(&params).map_err(|error| PageError {
            error,
            had_continue: token.is_some(),
        })?;
        let next = meta.continue_.filter(|c| !c.is_empty());
        match next {
            None => return Ok(Some(meta.resource_version.unwrap_or_default())),
            Some(n) if seen.contains(&n) => {
                let shown: String = n.chars().take(100).collect();
                return Err(PageError {
                    error: Error::Decode(format!(
                        "the server repeated continue token {shown:?} (a pagination loop)"
                    )),
                    had_continue: false,
                });
            }
            Some(n) => {
                seen.insert(n.clone());
                token = Some(n);
            }
        }
    }
}
