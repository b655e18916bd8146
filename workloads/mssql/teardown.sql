-- ssbench: remove what provisioning created in a target or initiator database (the database
-- itself stays unless `ssbench mssql teardown --drop-databases`; the database master key
-- stays: other things may use it). Order matters: services before queues and contracts,
-- contracts before message types, certificates before their users. Placeholders: see server.sql.

-- @@ end_conversations
IF OBJECT_ID(N'[dbo].[ssbench_reset]', N'P') IS NOT NULL
    EXEC [dbo].[ssbench_reset];

-- @@ broker_objects
IF EXISTS (SELECT * FROM sys.remote_service_bindings WHERE name = {{lit:binding}})
    DROP REMOTE SERVICE BINDING {{ident:binding}};
GO
IF EXISTS (SELECT * FROM sys.services WHERE name = {{lit:service}})
    DROP SERVICE {{sbname:service}};
GO
IF EXISTS (SELECT * FROM sys.service_queues WHERE name = {{lit:queue}} AND schema_id = SCHEMA_ID(N'dbo'))
    DROP QUEUE [dbo].{{ident:queue}};
GO
IF EXISTS (SELECT * FROM sys.service_contracts WHERE name = {{lit:contract}})
    DROP CONTRACT {{sbname:contract}};
GO
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

-- @@ code_and_tables
DROP PROCEDURE IF EXISTS [dbo].{{ident:activation_procedure}};
DROP PROCEDURE IF EXISTS [dbo].[ssbench_send];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_create_dialogs];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_warm_up];
DROP PROCEDURE IF EXISTS [dbo].[ssbench_reset];
DROP TABLE IF EXISTS [dbo].[messageDrop];
DROP TABLE IF EXISTS [dbo].[receiveTally];
DROP TABLE IF EXISTS [dbo].[messageErrors];
DROP TABLE IF EXISTS [dbo].[dialogs];
DROP TABLE IF EXISTS [dbo].[ssbench_config];

-- @@ own_certificate_drop
IF CERT_ID({{lit:certificate}}) IS NOT NULL
    DROP CERTIFICATE {{ident:certificate}};
