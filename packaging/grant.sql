-- The slurmdbd_exporter database user: SELECT on slurmdbd's database and
-- nothing else. The exporter also makes every session read-only, so it
-- cannot write even through a user granted more (docs/faults.md).
--
-- Run as a MariaDB/MySQL administrator on slurmdbd's database server, after
-- putting a password of your own for CHANGE_ME:
--   mysql < grant.sql
-- Use slurmdbd.conf's StorageLoc if it is not slurm_acct_db, and the
-- exporter's host instead of 'localhost' when it runs on another machine.
-- 'localhost' covers socket connections, and TCP from 127.0.0.1 only when
-- the server resolves host names (no skip-name-resolve). Then the DSN, in
-- /etc/slurmdbd_exporter/dsn (mode 0640 root:slurmdbd_exporter), is one of
--   exporter:CHANGE_ME@unix(/run/mysqld/mysqld.sock)/slurm_acct_db
--   exporter:CHANGE_ME@tcp(127.0.0.1:3306)/slurm_acct_db
CREATE USER 'exporter'@'localhost' IDENTIFIED BY 'CHANGE_ME';
GRANT SELECT ON slurm_acct_db.* TO 'exporter'@'localhost';
