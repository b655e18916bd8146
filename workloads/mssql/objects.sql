-- ssbench: the Service Broker objects both sides share, as the paper's configuration script
-- creates them ("The Initiator and Target servers have the same Service Broker configuration
-- for the message, contract, queue, and service"), plus dialog security and routing.
-- Run in the target or initiator database. Placeholders: see server.sql.

-- @@ owned_table
-- What ssbench created in this database: teardown drops only these (and the ssbench_* objects,
-- a reserved prefix). Returns 1 when the table was created now.
IF OBJECT_ID(N'[dbo].[ssbench_owned]', N'U') IS NULL
BEGIN
    CREATE TABLE [dbo].[ssbench_owned] (
        class nvarchar(60) NOT NULL,
        name sysname NOT NULL,
        created_at datetime2(0) NOT NULL DEFAULT SYSUTCDATETIME(),
        PRIMARY KEY (class, name));
    SELECT 1;
END
ELSE
    SELECT 0;

-- @@ owned_record
INSERT INTO [dbo].[ssbench_owned] (class, name)
SELECT ?, ? WHERE NOT EXISTS (SELECT * FROM [dbo].[ssbench_owned] WHERE class = ? AND name = ?);

-- @@ ownership
-- The objects provisioning creates under configurable or paper names: present here, and
-- recorded as ssbench's? (The ssbench_* names are ssbench's by prefix.)
SELECT v.class, v.name,
       CASE v.class
           WHEN N'MESSAGE TYPE' THEN (SELECT COUNT(*) FROM sys.service_message_types WHERE name = v.name)
           WHEN N'CONTRACT' THEN (SELECT COUNT(*) FROM sys.service_contracts WHERE name = v.name)
           WHEN N'QUEUE' THEN (SELECT COUNT(*) FROM sys.service_queues
                               WHERE name = v.name AND schema_id = SCHEMA_ID(N'dbo'))
           WHEN N'SERVICE' THEN (SELECT COUNT(*) FROM sys.services WHERE name = v.name)
           WHEN N'PROCEDURE' THEN (SELECT COUNT(*) FROM sys.procedures
                                   WHERE name = v.name AND schema_id = SCHEMA_ID(N'dbo'))
           WHEN N'TABLE' THEN (SELECT COUNT(*) FROM sys.tables
                               WHERE name = v.name AND schema_id = SCHEMA_ID(N'dbo'))
       END AS present,
       (SELECT COUNT(*) FROM [dbo].[ssbench_owned] AS o WHERE o.class = v.class AND o.name = v.name) AS owned
FROM (VALUES (N'MESSAGE TYPE', CAST(? AS sysname)), (N'CONTRACT', ?), (N'QUEUE', ?), (N'SERVICE', ?),
             (N'PROCEDURE', ?), (N'TABLE', N'messageDrop'), (N'TABLE', N'receiveTally'),
             (N'TABLE', N'messageErrors'), (N'TABLE', N'dialogs'),
             (N'TABLE', N'ssbench_config')) AS v (class, name);

-- @@ owned_list
-- Everything recorded as ssbench's (empty when provisioning never ran here).
IF OBJECT_ID(N'[dbo].[ssbench_owned]', N'U') IS NULL
    SELECT CAST(NULL AS nvarchar(60)), CAST(NULL AS sysname) WHERE 1 = 0;
ELSE
    SELECT class, name FROM [dbo].[ssbench_owned];

-- @@ contract_check
-- A message type or contract that exists already is used as it is, so it must be what ssbench
-- would create: the message type validates nothing (VALIDATION = NONE; with WELL_FORMED_XML the
-- target discards every binary body and answers with an Error), and the contract carries it
-- SENT BY ANY. Columns: the message type's validation_desc (NULL: no such message type), the
-- contract's presence, whether the contract's usage of the message type lets the initiator
-- and the target send it (NULL: the contract does not name it).
SELECT mt.validation_desc,
       (SELECT COUNT(*) FROM sys.service_contracts AS c WHERE c.name = ?) AS contract_present,
       (SELECT MAX(CAST(u.is_sent_by_initiator AS int))
        FROM sys.service_contract_message_usages AS u
        JOIN sys.service_contracts AS c ON c.service_contract_id = u.service_contract_id
        WHERE c.name = ? AND u.message_type_id = mt.message_type_id) AS sent_by_initiator,
       (SELECT MAX(CAST(u.is_sent_by_target AS int))
        FROM sys.service_contract_message_usages AS u
        JOIN sys.service_contracts AS c ON c.service_contract_id = u.service_contract_id
        WHERE c.name = ? AND u.message_type_id = mt.message_type_id) AS sent_by_target
FROM (VALUES (CAST(? AS sysname))) AS v (name)
LEFT JOIN sys.service_message_types AS mt ON mt.name = v.name;

-- @@ message_type
IF NOT EXISTS (SELECT * FROM sys.service_message_types WHERE name = {{lit:message_type}})
    CREATE MESSAGE TYPE {{sbname:message_type}} AUTHORIZATION [dbo]
        VALIDATION = NONE;

-- @@ contract
IF NOT EXISTS (SELECT * FROM sys.service_contracts WHERE name = {{lit:contract}})
    CREATE CONTRACT {{sbname:contract}} AUTHORIZATION [dbo]
        ({{sbname:message_type}} SENT BY ANY);

-- @@ queue
-- Created without activation; the target's activation is added by target.sql once the
-- activation procedure exists.
IF NOT EXISTS (SELECT * FROM sys.service_queues
               WHERE name = {{lit:queue}} AND schema_id = SCHEMA_ID(N'dbo'))
    CREATE QUEUE [dbo].{{ident:queue}} WITH STATUS = ON, RETENTION = OFF ON [PRIMARY];

-- @@ service
IF NOT EXISTS (SELECT * FROM sys.services WHERE name = {{lit:service}})
    CREATE SERVICE {{sbname:service}} AUTHORIZATION [dbo]
        ON QUEUE [dbo].{{ident:queue}} ({{sbname:contract}});

-- @@ error_table
-- The messages a receiving procedure could not process and why: on the target the paper's
-- user-defined error table (dbo.messageErrors, the activation procedure's), on an initiator
-- dbo.ssbench_dialog_errors (ssbench_initiator_end's: the Error messages that came back).
IF OBJECT_ID(N'dbo.' + {{lit:table}}, N'U') IS NULL
    CREATE TABLE [dbo].{{ident:table}} (
        id bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY CLUSTERED,
        received_at datetime2(7) NOT NULL,
        [dialog] uniqueidentifier NULL,
        message_type nvarchar(256) NULL,
        error nvarchar(4000) NOT NULL,
        messageVal varbinary(2000) NULL);
GO
-- seq: the message's sequence number in its conversation ([dialog], the receiving side's
-- handle): with it the accounting tells a data message that never reached messageDrop (poison)
-- from one processed before a later statement failed
IF COL_LENGTH(N'dbo.' + {{lit:table}}, N'seq') IS NULL
    ALTER TABLE [dbo].{{ident:table}} ADD seq bigint NULL;

-- @@ config_table
-- ssbench's settings in this database (e.g. the target's broker GUID on an initiator).
IF OBJECT_ID(N'[dbo].[ssbench_config]', N'U') IS NULL
    CREATE TABLE [dbo].[ssbench_config] (
        name sysname NOT NULL PRIMARY KEY,
        value nvarchar(4000) NULL);

-- @@ config_set
UPDATE [dbo].[ssbench_config] SET value = ? WHERE name = ?;
IF @@ROWCOUNT = 0
    INSERT INTO [dbo].[ssbench_config] (name, value) VALUES (?, ?);

-- @@ config_keep
-- Record a value only the first time (a database option as it was before ssbench changed it:
-- a later provision or a run interrupted halfway must not record ssbench's own value).
INSERT INTO [dbo].[ssbench_config] (name, value)
SELECT ?, ? WHERE NOT EXISTS (SELECT * FROM [dbo].[ssbench_config] WHERE name = ?);

-- @@ config_list
IF OBJECT_ID(N'[dbo].[ssbench_config]', N'U') IS NULL
    SELECT CAST(NULL AS sysname), CAST(NULL AS nvarchar(4000)) WHERE 1 = 0;
ELSE
    SELECT name, value FROM [dbo].[ssbench_config];

-- @@ database_options
-- The database options ssbench may change (DELAYED_DURABILITY per profile, HONOR_BROKER_PRIORITY
-- per permutation, ENABLE_BROKER / NEW_BROKER at provision), and the master key: present, and
-- encrypted by this instance's service master key (is_master_key_encrypted_by_server: 0 after a
-- restore or attach on another instance, when nobody can open it without its password).
SELECT d.delayed_durability_desc, CAST(d.is_broker_priority_honored AS int),
       CAST(d.is_broker_enabled AS int), CAST(d.service_broker_guid AS nvarchar(36)),
       (SELECT COUNT(*) FROM sys.symmetric_keys WHERE name = N'##MS_DatabaseMasterKey##') AS master_key,
       CAST(d.is_master_key_encrypted_by_server AS int)
FROM sys.databases AS d
WHERE d.database_id = DB_ID();

-- @@ impersonate_owner
-- Activation runs EXECUTE AS OWNER: it fails (and says so only in the ERRORLOG) when the
-- database owner cannot be impersonated, e.g. a login the server cannot resolve. NULL: fine.
BEGIN TRY
    EXECUTE AS USER = N'dbo';
    REVERT;
    SELECT CAST(NULL AS nvarchar(4000));
END TRY
BEGIN CATCH
    SELECT CAST(CONCAT(N'error ', ERROR_NUMBER(), N': ', ERROR_MESSAGE()) AS nvarchar(4000));
END CATCH;

-- @@ dialog_certificates
-- Certificates Service Broker could pick for this database's dialogs instead of ssbench's: it
-- uses the owner's certificate that is valid, marked ACTIVE FOR BEGIN_DIALOG, has a private key
-- the master key protects, and expires last ("Certificates for Dialog Security", "Certificates
-- and Service Broker"). dbo owns ssbench's services; ssbench's certificate expires on the date
-- given (or as it was created).
SELECT c.name, c.expiry_date
FROM sys.certificates AS c
WHERE c.principal_id = DATABASE_PRINCIPAL_ID(N'dbo') AND c.name <> ?
  AND c.is_active_for_begin_dialog = 1 AND c.pvt_key_encryption_type = 'MK'
  AND c.start_date <= GETUTCDATE() AND c.expiry_date > GETUTCDATE()
  AND c.expiry_date >= ISNULL((SELECT expiry_date FROM sys.certificates WHERE name = ?), CAST(? AS datetime));

-- @@ proxy_user
-- Dialog security: a user without login stands for the other side's service owner.
IF NOT EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    CREATE USER {{ident:user}} WITHOUT LOGIN;

-- @@ grant_send
-- The far side's user may connect and send to this database's service (on the target: the
-- initiator's service owner; on an initiator: the target's, for EndDialog and Error messages).
GRANT CONNECT TO {{ident:user}};
GO
GRANT SEND ON SERVICE::{{sbname:service}} TO {{ident:user}};

-- @@ remote_service_binding
-- Initiator side, as the paper: the binding names the user owning the target's certificate;
-- ANONYMOUS = OFF gives full dialog security (both sides authenticated). Only with
-- broker.dialog_encryption: true: BEGIN DIALOG ... WITH ENCRYPTION = OFF still encrypts when a
-- binding for the target service exists.
IF EXISTS (SELECT * FROM sys.remote_service_bindings WHERE name = {{lit:binding}})
    DROP REMOTE SERVICE BINDING {{ident:binding}};
GO
CREATE REMOTE SERVICE BINDING {{ident:binding}}
    AUTHORIZATION [dbo]
    TO SERVICE {{lit:service}}
    WITH USER = {{ident:user}}, ANONYMOUS = OFF;

-- @@ grant_send_public
-- broker.dialog_encryption: false, no remote service binding: no dialog security, and the far
-- side's operations run as public in this database ("Determining the dialog security type"),
-- so public may send to this database's service (the target's for the data messages, an
-- initiator's for the EndDialog and Error messages that come back).
GRANT SEND ON SERVICE::{{sbname:service}} TO [public];

-- @@ revoke_send_public
-- broker.dialog_encryption: true again: the grant above is taken back (the service is ssbench's).
REVOKE SEND ON SERVICE::{{sbname:service}} FROM [public];

-- @@ route
-- A route names the far database by its broker GUID (BROKER_INSTANCE): several databases
-- host a service of the same name. ADDRESS is TCP://host:port of the far instance's Service
-- Broker endpoint, or LOCAL when both databases are on one instance.
IF EXISTS (SELECT * FROM sys.routes WHERE name = {{lit:route}})
    DROP ROUTE {{ident:route}};
GO
CREATE ROUTE {{ident:route}}
    AUTHORIZATION [dbo]
    WITH SERVICE_NAME = {{lit:service}},
         BROKER_INSTANCE = {{guid:broker_instance}},
         ADDRESS = {{lit:address}};

-- @@ end_conversations_procedure
-- Between permutations (ssbench_reset, in both roles): end every conversation of the service
-- WITH CLEANUP (no EndDialog messages; also drops its messages from sys.transmission_queue).
-- An endpoint can vanish while the cursor walks the static list (the broker deletes an
-- initiator endpoint once both sides have ended its dialog): its END CONVERSATION fails, and
-- the TRY/CATCH skips it. XACT_ABORT ON dooms the batch's transaction on that error (and on an
-- attention); it is rolled back and the next pass ends what it held (at most three passes).
-- Returns the conversations ended, those left, and the END CONVERSATIONs that failed.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_end_conversations]
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @dh uniqueidentifier, @n int = 0, @batch int = 0, @failed int = 0, @pass int = 0,
            @left int = 1;
    WHILE @left > 0 AND @pass < 3
    BEGIN
        SET @pass = @pass + 1;
        DECLARE conv CURSOR LOCAL STATIC READ_ONLY FOR
            SELECT ce.conversation_handle
            FROM sys.conversation_endpoints AS ce
            JOIN sys.services AS s ON s.service_id = ce.service_id
            WHERE s.name = {{lit:service}};
        OPEN conv;
        FETCH NEXT FROM conv INTO @dh;
        BEGIN TRANSACTION;
        WHILE @@FETCH_STATUS = 0
        BEGIN
            BEGIN TRY
                END CONVERSATION @dh WITH CLEANUP;
                SET @batch = @batch + 1;
            END TRY
            BEGIN CATCH
                SET @failed = @failed + 1;
                IF XACT_STATE() <> 0 ROLLBACK TRANSACTION;
                SET @batch = 0;
                BEGIN TRANSACTION;
            END CATCH;
            IF @batch >= 1000
            BEGIN
                COMMIT TRANSACTION;
                SELECT @n = @n + @batch, @batch = 0;
                BEGIN TRANSACTION;
            END;
            FETCH NEXT FROM conv INTO @dh;
        END;
        COMMIT TRANSACTION;
        SELECT @n = @n + @batch, @batch = 0;
        CLOSE conv;
        DEALLOCATE conv;
        SELECT @left = COUNT(*)
        FROM sys.conversation_endpoints AS ce
        JOIN sys.services AS s ON s.service_id = ce.service_id
        WHERE s.name = {{lit:service}};
    END;
    SELECT @n AS conversations_ended, @left AS conversations_left, @failed AS end_errors;
END;

-- @@ call_reset
EXEC [dbo].[ssbench_reset];

-- @@ routes
SELECT name, remote_service_name, broker_instance, address FROM sys.routes;

-- @@ objects_present
SELECT
    (SELECT COUNT(*) FROM sys.service_message_types WHERE name = ?) AS message_type,
    (SELECT COUNT(*) FROM sys.service_contracts WHERE name = ?) AS contract,
    (SELECT COUNT(*) FROM sys.service_queues WHERE name = ? AND schema_id = SCHEMA_ID(N'dbo')) AS queue,
    (SELECT COUNT(*) FROM sys.services WHERE name = ?) AS service,
    (SELECT COUNT(*) FROM sys.remote_service_bindings) AS bindings,
    (SELECT COUNT(*) FROM sys.symmetric_keys WHERE name = N'##MS_DatabaseMasterKey##') AS master_key,
    IS_MEMBER(N'db_owner') AS db_owner,
    HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', 'ALTER') AS alter_database;

-- @@ transmission_status
-- Messages stuck in the transmission queue and why (the classic Service Broker diagnosis).
SELECT TOP (10) to_service_name, to_broker_instance, transmission_status, COUNT(*) AS messages
FROM sys.transmission_queue
GROUP BY to_service_name, to_broker_instance, transmission_status
ORDER BY COUNT(*) DESC;

-- @@ priority_objects
-- Conversation priority (a `priority` axis; seed 003, SQL Server 2008+): a second contract,
-- [ssbench_high_priority], for the same message type, accepted by the service, and a broker
-- priority giving its conversations PRIORITY_LEVEL = 10 (the default is 5). Both ends of a
-- conversation look up their own database's priorities, so every database gets them. RECEIVE
-- always takes higher-priority conversations first; HONOR_BROKER_PRIORITY (section
-- honor_priority, set per permutation) decides whether SEND and the transmission queue honour
-- them too. Between services of one instance no transmission happens, so there only RECEIVE
-- orders by priority (CREATE BROKER PRIORITY, remarks).
IF NOT EXISTS (SELECT * FROM sys.service_contracts WHERE name = N'ssbench_high_priority')
    CREATE CONTRACT [ssbench_high_priority] AUTHORIZATION [dbo]
        ({{sbname:message_type}} SENT BY ANY);
GO
IF NOT EXISTS (SELECT * FROM sys.service_contract_usages AS u
               JOIN sys.services AS s ON s.service_id = u.service_id
               JOIN sys.service_contracts AS c ON c.service_contract_id = u.service_contract_id
               WHERE s.name = {{lit:service}} AND c.name = N'ssbench_high_priority')
    ALTER SERVICE {{sbname:service}} (ADD CONTRACT [ssbench_high_priority]);
GO
IF NOT EXISTS (SELECT * FROM sys.conversation_priorities WHERE name = N'ssbench_high')
    CREATE BROKER PRIORITY [ssbench_high] FOR CONVERSATION
        SET (CONTRACT_NAME = [ssbench_high_priority],
             LOCAL_SERVICE_NAME = ANY,
             REMOTE_SERVICE_NAME = ANY,
             PRIORITY_LEVEL = 10);

-- @@ honor_priority
-- Per permutation: ON when some dialogs are begun at high priority, OFF (SQL Server's
-- default, the baseline) when none are; changed only when it differs. The value the database
-- had before ssbench changed it is recorded (database_options) and restored after the run and
-- at teardown.
IF (SELECT is_broker_priority_honored FROM sys.databases WHERE name = DB_NAME()) <> {{int:honor}}
    ALTER DATABASE {{ident:database}} SET HONOR_BROKER_PRIORITY {{kw:honor_kw}};
