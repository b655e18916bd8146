-- ssbench: remove what provisioning created in a target or initiator database, and nothing
-- else: objects under the paper's or configured names only when dbo.ssbench_owned records
-- them, ssbench_* objects always (a reserved prefix). The database itself stays unless
-- `ssbench mssql teardown --drop-databases` and ssbench created it; the database master key
-- stays (other things may use it). Python runs the sections in order: services before queues
-- and contracts, contracts before message types, certificates before their users.
-- Placeholders: see server.sql.

-- @@ end_conversations
IF OBJECT_ID(N'[dbo].[ssbench_reset]', N'P') IS NOT NULL
    EXEC [dbo].[ssbench_reset];

-- @@ binding_drop
IF EXISTS (SELECT * FROM sys.remote_service_bindings WHERE name = {{lit:binding}})
    DROP REMOTE SERVICE BINDING {{ident:binding}};

-- @@ priority_drop
-- ssbench's broker priority and high-priority contract (the ssbench_ prefix is reserved),
-- before the service they are attached to. (HONOR_BROKER_PRIORITY goes back to the value the
-- database had before ssbench, recorded in ssbench_config: database_options, objects.sql.)
IF EXISTS (SELECT * FROM sys.conversation_priorities WHERE name = N'ssbench_high')
    DROP BROKER PRIORITY [ssbench_high];
GO
IF EXISTS (SELECT * FROM sys.service_contract_usages AS u
           JOIN sys.services AS s ON s.service_id = u.service_id
           JOIN sys.service_contracts AS c ON c.service_contract_id = u.service_contract_id
           WHERE s.name = {{lit:service}} AND c.name = N'ssbench_high_priority')
    ALTER SERVICE {{sbname:service}} (DROP CONTRACT [ssbench_high_priority]);
GO
IF EXISTS (SELECT * FROM sys.service_contracts WHERE name = N'ssbench_high_priority')
    DROP CONTRACT [ssbench_high_priority];

-- @@ service_drop
IF EXISTS (SELECT * FROM sys.services WHERE name = {{lit:service}})
    DROP SERVICE {{sbname:service}};

-- @@ queue_drop
IF EXISTS (SELECT * FROM sys.service_queues WHERE name = {{lit:queue}} AND schema_id = SCHEMA_ID(N'dbo'))
    DROP QUEUE [dbo].{{ident:queue}};

-- @@ contract_drop
IF EXISTS (SELECT * FROM sys.service_contracts WHERE name = {{lit:contract}})
    DROP CONTRACT {{sbname:contract}};

-- @@ message_type_drop
IF EXISTS (SELECT * FROM sys.service_message_types WHERE name = {{lit:message_type}})
    DROP MESSAGE TYPE {{sbname:message_type}};

-- @@ route_drop
IF EXISTS (SELECT * FROM sys.routes WHERE name = {{lit:route}})
    DROP ROUTE {{ident:route}};

-- @@ proxy_drop
IF CERT_ID({{lit:certificate}}) IS NOT NULL
    DROP CERTIFICATE {{ident:certificate}};
GO
IF EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    DROP USER {{ident:user}};

-- @@ ssbench_code
-- ssbench's own procedures and table (the ssbench_ prefix is reserved).
DROP PROCEDURE IF EXISTS [dbo].[ssbench_send];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_send_retiring];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_initiator_end];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_initiator_reader_on];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_end_conversations];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_create_dialogs];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_begin_dialog];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_warm_up];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_reset];
DROP TABLE IF EXISTS [dbo].[ssbench_config];
DROP TABLE IF EXISTS [dbo].[ssbench_counts];
DROP TABLE IF EXISTS [dbo].[ssbench_dialog_errors];

-- @@ procedure_drop
-- The activation procedure, when ssbench created it.
DROP PROCEDURE IF EXISTS [dbo].{{ident:procedure}};

-- @@ table_drop
-- A paper-named table (messageDrop, receiveTally, messageErrors, dialogs), when ssbench created it.
DROP TABLE IF EXISTS [dbo].{{ident:table}};

-- @@ owned_drop
-- Last: the record of what ssbench created here.
DROP TABLE IF EXISTS [dbo].[ssbench_owned];

-- @@ owned_prune
-- Last, when ssbench created the database and it stays: only that record is kept, so a later
-- `teardown --drop-databases` still knows the database is ssbench's.
DELETE FROM [dbo].[ssbench_owned] WHERE class <> N'DATABASE';

-- @@ own_certificate_drop
IF CERT_ID({{lit:certificate}}) IS NOT NULL
    DROP CERTIFICATE {{ident:certificate}};
