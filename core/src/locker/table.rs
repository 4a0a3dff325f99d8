//! The lock table itself: creating and upgrading it, and reading who holds what
//! (`status`, `holder`).

use super::*;

impl<C: Connector> Locker<C> {
    /// The table's rows (all, or the one for `name`), for introspection.
    pub fn status(&mut self, name: Option<&str>) -> Result<Vec<LockStatus>> {
        self.schema(name.unwrap_or(""))?;
        let (sql, params): (String, Vec<Value>) = match name {
            Some(n) => (self.sql.status_one.clone(), vec![n.into()]),
            None => (self.sql.status_all.clone(), vec![]),
        };
        let out = self.with_db(|db, _| db.run(name.unwrap_or(""), &sql, &params))?;
        Ok(out
            .rows
            .iter()
            .map(|r| {
                let connection_id = r[1].as_u64().unwrap_or(0);
                LockStatus {
                    name: r[0].as_text().unwrap_or_default(),
                    connection_id,
                    created: r[2].as_i64().unwrap_or(0),
                    ttl: r[3].as_i64().unwrap_or(0),
                    acquired: r[4].as_i64().unwrap_or(0) != 0,
                    remaining: r[5].as_f64().unwrap_or(0.0),
                    age: r[6].as_f64().unwrap_or(0.0),
                    holder_alive: r[7].as_u64() == Some(connection_id),
                    host: r[8].as_text(),
                    token: r[9].as_u64(),
                    hostname: r[10].as_text().filter(|h| !h.is_empty()),
                    pid: r[11].as_u64(),
                }
            })
            .collect())
    }

    /// Who holds `name` now (any spelling the table folds together), from its row;
    /// `None` when there is no row.
    pub fn holder(&mut self, name: &str) -> Result<Option<LockStatus>> {
        Ok(self.status(Some(name))?.into_iter().next())
    }

    /// Creates the table with the original package's SQL if it does not exist.
    /// Returns whether it was created.
    pub fn init_table(&mut self) -> Result<bool> {
        let exists = self.look_up_schema("")?.is_some();
        if !exists {
            let create = self.sql.create.clone();
            let table = self.table.clone();
            self.with_db(|db, _| {
                let create = create_for(db.session, create, &table)?;
                db.run("", &create, &[])
            })?;
            self.forget_shape();
        }
        Ok(!exists)
    }

    /// Creates the table if needed and adds the columns for fencing tokens and
    /// introspection (`token`, `holder_host`, `holder_pid`) if they are missing.
    /// Processes running the original package keep working on the upgraded table.
    /// Returns whether anything changed.
    pub fn upgrade_table(&mut self) -> Result<bool> {
        let created = self.init_table()?;
        self.forget_shape();
        if self.schema("")?.upgraded {
            return Ok(created);
        }
        let present = self.read_columns("")?.map_or(0, |(_, n)| n);
        if present > 0 {
            return Err(Error::invalid(
                "table",
                format!(
                    "{} has {present} of the columns {} but not all: fix it by hand",
                    self.table.display_name(),
                    UPGRADE_COLUMNS.join(", ")
                ),
            ));
        }
        let upgrade = self.sql.upgrade.clone();
        let altered = self.with_db(|db, _| db.run("", &upgrade, &[]));
        self.forget_shape();
        let upgraded = self.schema("")?.upgraded;
        match altered {
            Ok(_) => Ok(true),
            // Another process upgraded it at the same moment (duplicate column or key).
            Err(Error::Database { source, .. }) if upgraded && matches!(source.code, Some(1060 | 1061)) => Ok(created),
            Err(e) => Err(e),
        }
    }

    /// The `name` column's character set and how many of the upgrade's columns exist;
    /// `None` when the table (or its `name` column) does not.
    pub(super) fn read_columns(&mut self, name: &str) -> Result<Option<(Option<String>, i64)>> {
        let lookup = self.sql.schema.clone();
        let mut params: Vec<Value> = Vec::new();
        if let Some(schema) = self.table.schema() {
            params.push(schema.into());
        }
        params.push(self.table.name().into());
        let out = self.with_db(|db, _| db.run(name, &lookup, &params))?;
        if out.first(1).as_i64().unwrap_or(0) == 0 {
            return Ok(None);
        }
        Ok(Some((out.first(0).as_text(), out.first(2).as_i64().unwrap_or(0))))
    }
}

/// What the server is: as the session learned it while it was set up, else asked.
pub(super) fn topology_of<S: Session + ?Sized>(session: &mut S, table: &crate::Table) -> Result<crate::Topology> {
    match session.topology() {
        Some(known) => Ok(known),
        None => crate::topology::probe(|sql| session.execute(sql, &[])).map_err(|e| classify(e, None, table)),
    }
}

/// The lock table's DDL for this server: the original package's (MyISAM), except on a
/// Group Replication member (reached only with allow_cluster), which refuses writes to
/// any table that is not InnoDB (error 3098): there the same table is made InnoDB.
pub(super) fn create_for<S: Session + ?Sized>(session: &mut S, create: String, table: &crate::Table) -> Result<String> {
    if topology_of(session, table)?.group_configured {
        Ok(create.replacen("ENGINE=MyISAM", "ENGINE=InnoDB", 1))
    } else {
        Ok(create)
    }
}
