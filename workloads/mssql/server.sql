-- ssbench: instance-level T-SQL for the SQL Server target (run connected to master, or msdb
-- where a section says so). Rendered by harness/targets/mssql/tsql.py: {{ident:x}} is a
-- validated, bracket-quoted name, {{lit:x}} an N'...' literal, {{int:x}} an integer,
-- {{hex:x}} a binary constant, {{guid:x}} a GUID literal, {{kw:x}} a keyword from a fixed
-- list, {{date:x}} an N'YYYYMMDD' literal. "?" marks are ODBC parameters bound by pyodbc.
-- {{sbname:x}} is a validated, bracket-quoted Service Broker name (//MySSB.com/Lab/S_Test).
-- Sections start with "-- @@ name"; GO lines separate batches.

-- @@ server_info
SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS product_version,
       CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS edition,
       CAST(SERVERPROPERTY('ServerName') AS nvarchar(256)) AS server_name,
       CAST(SERVERPROPERTY('ProductLevel') AS nvarchar(128)) AS product_level,
       SUSER_SNAME() AS login_name,
       CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition;   -- 5 Azure SQL Database, 8 Managed Instance

-- @@ permissions
-- What each step needs on the instance (ssbench mssql check prints a line for each missing one).
SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'CONTROL SERVER') AS control_server,
       HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') AS view_server_state,
       HAS_PERMS_BY_NAME(NULL, NULL, 'CREATE ENDPOINT') AS create_endpoint,
       HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY LOGIN') AS alter_any_login,
       HAS_PERMS_BY_NAME(NULL, NULL, 'CREATE ANY DATABASE') AS create_any_database,
       HAS_PERMS_BY_NAME(N'master', N'DATABASE', 'CONTROL') AS control_master,
       HAS_PERMS_BY_NAME(N'msdb', N'DATABASE', 'CREATE ROUTE') AS create_route_msdb;

-- @@ utc_now
SELECT SYSUTCDATETIME();

-- @@ broker_endpoints
-- An instance has at most one Service Broker endpoint.
SELECT e.name, t.port, e.state_desc, e.connection_auth_desc, e.encryption_algorithm_desc,
       c.name AS certificate_name
FROM sys.service_broker_endpoints AS e
JOIN sys.tcp_endpoints AS t ON t.endpoint_id = e.endpoint_id
LEFT JOIN sys.certificates AS c ON c.certificate_id = e.certificate_id;

-- @@ database_info
SELECT d.name, d.database_id, d.is_broker_enabled, CAST(d.service_broker_guid AS nvarchar(36)),
       d.delayed_durability_desc, d.state_desc, SUSER_SNAME(d.owner_sid), d.user_access_desc,
       d.recovery_model_desc, CAST(IIF(d.replica_id IS NULL, 0, 1) AS int) AS in_availability_group
FROM sys.databases AS d
WHERE d.name = ?;

-- @@ create_database
IF DB_ID({{lit:database}}) IS NULL
    CREATE DATABASE {{ident:database}};

-- @@ log_file
-- A database's log file: its logical name and size in MB (size is in 8-KB pages).
SELECT TOP (1) name, CAST(size AS bigint) * 8 / 1024
FROM sys.master_files
WHERE database_id = DB_ID(?) AND type = 1;

-- @@ log_size
-- A database ssbench created takes model's log size and growth: its log is sized
-- (broker.log_size_mb, a quarter of it per growth) so autogrowth does not land in the first
-- permutation as WRITELOG. Only ever larger (MODIFY FILE cannot shrink a file).
ALTER DATABASE {{ident:database}}
    MODIFY FILE (NAME = {{ident:file}}, SIZE = {{int:size_mb}}MB, FILEGROWTH = {{int:growth_mb}}MB);

-- @@ enable_broker
-- A database ssbench created (harness/targets/mssql/exclusive.py): ENABLE_BROKER needs an
-- exclusive database lock, and ROLLBACK IMMEDIATE rolls back the other sessions there.
ALTER DATABASE {{ident:database}} SET ENABLE_BROKER WITH ROLLBACK IMMEDIATE;

-- @@ enable_broker_wait
-- A database ssbench did not create: no termination clause, so ENABLE_BROKER "will wait until
-- the other sessions release their locks" (ALTER DATABASE SET options); ssbench cancels the wait
-- after 30 s and refuses. Nobody else's transaction is rolled back.
ALTER DATABASE {{ident:database}} SET ENABLE_BROKER;

-- @@ new_broker
-- A new broker identifier: every existing conversation of the database is removed, and every
-- route naming the old identifier must be re-created (ssbench does). Only on a database ssbench
-- created: prepare with broker.reset: new_broker, duplicate GUIDs within the topology, and
-- provision when ENABLE_BROKER failed with error 9772 (another database of the instance has
-- the same identifier enabled).
ALTER DATABASE {{ident:database}} SET NEW_BROKER WITH ROLLBACK IMMEDIATE;

-- @@ disable_broker
-- teardown: the database had message delivery off before ssbench enabled it (ssbench created it)
ALTER DATABASE {{ident:database}} SET DISABLE_BROKER WITH ROLLBACK IMMEDIATE;

-- @@ disable_broker_wait
-- teardown, a database ssbench did not create: waits for the other sessions (enable_broker_wait)
ALTER DATABASE {{ident:database}} SET DISABLE_BROKER;

-- @@ delayed_durability
ALTER DATABASE {{ident:database}} SET DELAYED_DURABILITY = {{kw:delayed_durability}};

-- @@ drop_database
IF DB_ID({{lit:database}}) IS NOT NULL
BEGIN
    ALTER DATABASE {{ident:database}} SET SINGLE_USER WITH ROLLBACK IMMEDIATE;
    DROP DATABASE {{ident:database}};
END;

-- @@ master_key
-- A master key in the current database (master for transport certificates, the user
-- database for dialog certificates). It is also encrypted by the service master key, so
-- nobody needs the password later: ssbench generates it and never stores it. Returns 1 when
-- it was created now (ssbench records it as its own).
IF NOT EXISTS (SELECT * FROM sys.symmetric_keys WHERE name = N'##MS_DatabaseMasterKey##')
BEGIN
    CREATE MASTER KEY ENCRYPTION BY PASSWORD = {{lit:password}};
    SELECT 1;
END
ELSE
    SELECT 0;

-- @@ master_key_drop
-- A master key ssbench created that this instance cannot open (the database was restored or
-- attached from another instance: is_master_key_encrypted_by_server = 0 and the password was
-- never stored): dropped after ssbench's certificates it protects, then created again.
IF EXISTS (SELECT * FROM sys.symmetric_keys WHERE name = N'##MS_DatabaseMasterKey##')
    DROP MASTER KEY;

-- @@ own_certificate
-- A certificate with a private key (encrypted by the master key), owned by dbo.
IF CERT_ID({{lit:certificate}}) IS NULL
    CREATE CERTIFICATE {{ident:certificate}}
        AUTHORIZATION [dbo]
        WITH SUBJECT = {{lit:subject}},
             START_DATE = {{date:start_date}},
             EXPIRY_DATE = {{date:expiry_date}};

-- @@ certificate_public
-- The public part of a certificate (no private key), to install on the peer with
-- CREATE CERTIFICATE ... FROM BINARY: no shared file system needed.
SELECT CERTENCODED(c.certificate_id), c.thumbprint
FROM sys.certificates AS c
WHERE c.name = ?;

-- @@ certificate_thumbprint
SELECT c.thumbprint FROM sys.certificates AS c WHERE c.name = ?;

-- @@ drop_certificate
IF CERT_ID({{lit:certificate}}) IS NOT NULL
    DROP CERTIFICATE {{ident:certificate}};

-- @@ peer_certificate
-- The peer's public certificate, owned by the peer's user (dialog security: a user without
-- login; transport security: the user of the peer's login in master).
CREATE CERTIFICATE {{ident:certificate}}
    AUTHORIZATION {{ident:user}}
    FROM BINARY = {{hex:certificate_bytes}};

-- @@ endpoint_create
-- The paper's endpoint: certificate authentication, no transport encryption by default.
-- (Options in the order Books Online's syntax gives them; ENDPOINT DDL cannot run inside a
-- user transaction: ssbench's connections are in autocommit mode.)
CREATE ENDPOINT {{ident:endpoint}}
    STATE = STARTED
    AS TCP (LISTENER_PORT = {{int:port}}, LISTENER_IP = ALL)
    FOR SERVICE_BROKER (
        AUTHENTICATION = CERTIFICATE {{ident:certificate}},
        ENCRYPTION = {{kw:encryption}},
        MESSAGE_FORWARDING = DISABLED);

-- @@ endpoint_alter
ALTER ENDPOINT {{ident:endpoint}}
    STATE = STARTED
    AS TCP (LISTENER_PORT = {{int:port}}, LISTENER_IP = ALL)
    FOR SERVICE_BROKER (
        AUTHENTICATION = CERTIFICATE {{ident:certificate}},
        ENCRYPTION = {{kw:encryption}},
        MESSAGE_FORWARDING = DISABLED);

-- @@ endpoint_owner
-- (master) The endpoint ssbench created on this instance, recorded as a database-level
-- extended property of master (endpoints take no extended properties of their own).
SELECT CAST(value AS nvarchar(128)) FROM sys.extended_properties
WHERE class = 0 AND name = N'ssbench_endpoint';

-- @@ endpoint_owner_set
IF EXISTS (SELECT * FROM sys.extended_properties WHERE class = 0 AND name = N'ssbench_endpoint')
    EXEC sys.sp_updateextendedproperty @name = N'ssbench_endpoint', @value = {{lit:endpoint}};
ELSE
    EXEC sys.sp_addextendedproperty @name = N'ssbench_endpoint', @value = {{lit:endpoint}};

-- @@ endpoint_owner_drop
IF EXISTS (SELECT * FROM sys.extended_properties WHERE class = 0 AND name = N'ssbench_endpoint')
    EXEC sys.sp_dropextendedproperty @name = N'ssbench_endpoint';

-- @@ endpoint_drop
IF EXISTS (SELECT * FROM sys.service_broker_endpoints WHERE name = {{lit:endpoint}})
    DROP ENDPOINT {{ident:endpoint}};

-- @@ peer_login
-- Transport security: a login and a master user for the other instance; its certificate
-- (peer_certificate) is what the other instance's endpoint authenticates with. The password
-- is random and never stored: nobody logs in with it.
IF NOT EXISTS (SELECT * FROM sys.server_principals WHERE name = {{lit:login}})
    CREATE LOGIN {{ident:login}} WITH PASSWORD = {{lit:password}};
GO
IF NOT EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    CREATE USER {{ident:user}} FOR LOGIN {{ident:login}};

-- @@ peer_grant_connect
GRANT CONNECT ON ENDPOINT::{{ident:endpoint}} TO {{ident:login}};

-- @@ peer_drop
IF CERT_ID({{lit:certificate}}) IS NOT NULL
    DROP CERTIFICATE {{ident:certificate}};
GO
IF EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    DROP USER {{ident:user}};
GO
IF EXISTS (SELECT * FROM sys.server_principals WHERE name = {{lit:login}})
    DROP LOGIN {{ident:login}};

-- @@ msdb_route
-- (run in msdb) Incoming messages from other instances are routed by msdb's routing table:
-- deliver this database's service locally.
IF EXISTS (SELECT * FROM sys.routes WHERE name = {{lit:route}})
    DROP ROUTE {{ident:route}};
GO
CREATE ROUTE {{ident:route}}
    WITH SERVICE_NAME = {{lit:service}},
         BROKER_INSTANCE = {{guid:broker_instance}},
         ADDRESS = N'LOCAL';

-- @@ msdb_route_drop
-- (run in msdb)
IF EXISTS (SELECT * FROM sys.routes WHERE name = {{lit:route}})
    DROP ROUTE {{ident:route}};

-- @@ login_exists
SELECT COUNT(*) FROM sys.server_principals WHERE name = ?;
