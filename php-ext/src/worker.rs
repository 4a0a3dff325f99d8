//! `MySqlLock\end_request()`: the request end of worker-mode servers (FrankenPHP's worker
//! mode, RoadRunner, Swoole, ReactPHP, Laravel Octane), which serve many HTTP requests in
//! one PHP request and so never reach the engine's request shutdown between them. The
//! worker loop calls it after each request; it does to `SharedLock` and `SessionLock`
//! what request end does (`state::end_request`), and leaves `DistributedLock` leases,
//! which outlive requests by design, alone.

use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::exception::PhpResult;
use ext_php_rs::flags::DataType;
use ext_php_rs::types::Zval;
use ext_php_rs::zend::ExecuteData;

use crate::args::Args;
use crate::handler::{handlers, int};
use crate::lock_exceptions::to_php;
use crate::registry::OWN_NS;
use crate::state;

/// The function, for the module builder.
pub fn end_request_function() -> FunctionBuilder<'static> {
    FunctionBuilder::new(format!("{OWN_NS}\\end_request"), end_request).returns(DataType::Long, false, false)
}

handlers! {
    end_request => end_request_body,
}

/// `end_request(): int`: the number of `SharedLock` and `SessionLock` locks that were
/// still held, all released now.
fn end_request_body(ex: &mut ExecuteData) -> PhpResult<Zval> {
    Args::fetch(ex, &[], 0)?;
    let held = state::end_request().map_err(|e| to_php("MySqlLock\\end_request()", &e))?;
    Ok(int(i64::try_from(held).unwrap_or(i64::MAX)))
}
