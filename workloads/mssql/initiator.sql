-- ssbench: an initiator database (the paper's "SSB Initiator"): the dialogs table, the send
-- procedure the load generator's users call, dialog creation (the 150 trick), the warm-up,
-- the reset. Placeholders: see server.sql. Message body layout: see target.sql.

-- @@ tables
-- The paper's dbo.dialogs: slot k -> the dialog handle client thread k sends on.
IF OBJECT_ID(N'[dbo].[dialogs]', N'U') IS NULL
    CREATE TABLE [dbo].[dialogs] (
        k int NOT NULL PRIMARY KEY CLUSTERED,
        handle uniqueidentifier NOT NULL);
GO
-- whether slot k's dialog was begun at high priority (a `priority` axis)
IF COL_LENGTH(N'[dbo].[dialogs]', N'high') IS NULL
    ALTER TABLE [dbo].[dialogs] ADD high bit NOT NULL DEFAULT 0;
GO
-- ssbench's own accounting of the SEND path: committed SENDs, and the dialogs it began and
-- ended, counted inside the sending transaction, so a row holds exactly what committed. (An
-- initiator's conversation endpoint is deleted once both sides have ended its dialog, so
-- sys.conversation_endpoints.send_sequence cannot count the messages of retired dialogs.)
-- One row per session (@@SPID): concurrent senders never update the same row, and the
-- fixed-length filler keeps one row per 8 KB page, so they never latch the same page either.
IF OBJECT_ID(N'[dbo].[ssbench_counts]', N'U') IS NULL
    CREATE TABLE [dbo].[ssbench_counts] (
        spid int NOT NULL PRIMARY KEY CLUSTERED,
        sent bigint NOT NULL DEFAULT 0,
        begun bigint NOT NULL DEFAULT 0,
        ended bigint NOT NULL DEFAULT 0,
        filler char(5000) NOT NULL DEFAULT '');
-- (dbo.ssbench_dialog_errors, the Error messages the target sent back on a dialog, recorded by
-- ssbench_initiator_end with what went wrong in it: objects.sql error_table.)

-- @@ send_procedure
-- One SEND on the caller's dialog and its count, in one transaction. XACT_ABORT ON: an error
-- or an attention (the client's query timeout cancels the call) rolls the whole transaction
-- back; without it an attention leaves the transaction open on the connection (@@TRANCOUNT
-- stays 1) and every later call nests inside it. The body is the header (initiator number,
-- send time) then the caller's payload from byte 37 on, so the message is as long as the
-- payload (at least 36 bytes). The counter update is reached through the procedure's
-- ownership chain (dbo owns both): the sender needs EXECUTE only.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_send]
    @dh uniqueidentifier,
    @payload varbinary(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @body varbinary(max) =
        {{hex:data_prefix}}
        + CAST(CONVERT(char(27), SYSUTCDATETIME(), 121) AS varbinary(27))
        + 0x3B
        + ISNULL(SUBSTRING(@payload, 37, DATALENGTH(@payload)), 0x);
    BEGIN TRANSACTION;
    SEND ON CONVERSATION @dh MESSAGE TYPE {{sbname:message_type}} (@body);
    UPDATE [dbo].[ssbench_counts] SET sent = sent + 1 WHERE spid = @@SPID;
    IF @@ROWCOUNT = 0
        INSERT INTO [dbo].[ssbench_counts] (spid, sent) VALUES (@@SPID, 1);
    COMMIT TRANSACTION;
END;

-- @@ send_retiring_procedure
-- A finite dialog lifetime (the messages_per_dialog axis, docs/matrices.md), still one call
-- per SEND: BEGIN DIALOG first when @dh is NULL (on the high-priority contract when @high = 1:
-- the slot's dialogs were begun there, a `priority` axis), SEND, and on the dialog's last
-- message (@last = 1) either END CONVERSATION at once (@fire_and_forget = 1: the initiator ends
-- first, so an Error the target sends back reaches an endpoint nobody RECEIVEs on) or mark the
-- body 'SSBL' so the target ends the dialog after processing it and the initiator ends its
-- side when that EndDialog arrives (ssbench_initiator_end), the pattern the seeds recommend.
-- The SEND, the dialog begun and the dialog ended are counted in the same transaction
-- (XACT_ABORT ON, as in ssbench_send). Returns the handle to send on next, NULL once the
-- dialog is retired. EXECUTE AS OWNER: as for create_dialogs.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_send_retiring]
    @dh uniqueidentifier,
    @payload varbinary(max),
    @last bit,
    @fire_and_forget bit,
    @high bit = 0
WITH EXECUTE AS OWNER
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @begun int = 0, @ended int = 0;
    BEGIN TRANSACTION;
    IF @dh IS NULL
    BEGIN
        EXEC [dbo].[ssbench_begin_dialog] @high, @dh OUTPUT;
        SET @begun = 1;
    END;
    DECLARE @prefix varbinary(8) = {{hex:data_prefix}};
    IF @last = 1 AND @fire_and_forget = 0
        SET @prefix = 0x5353424C + SUBSTRING(@prefix, 5, 4);   -- 'SSBL': the dialog's last message
    DECLARE @body varbinary(max) =
        @prefix
        + CAST(CONVERT(char(27), SYSUTCDATETIME(), 121) AS varbinary(27))
        + 0x3B
        + ISNULL(SUBSTRING(@payload, 37, DATALENGTH(@payload)), 0x);
    SEND ON CONVERSATION @dh MESSAGE TYPE {{sbname:message_type}} (@body);
    IF @last = 1 AND @fire_and_forget = 1
    BEGIN
        END CONVERSATION @dh;
        SET @ended = 1;
    END;
    UPDATE [dbo].[ssbench_counts]
        SET sent = sent + 1, begun = begun + @begun, ended = ended + @ended
        WHERE spid = @@SPID;
    IF @@ROWCOUNT = 0
        INSERT INTO [dbo].[ssbench_counts] (spid, sent, begun, ended) VALUES (@@SPID, 1, @begun, @ended);
    COMMIT TRANSACTION;
    SELECT CASE WHEN @last = 1 THEN NULL ELSE CAST(@dh AS nvarchar(36)) END AS next_handle;
END;

-- @@ initiator_end_procedure
-- The initiator service's queue reader: RECEIVE the EndDialog and Error messages the target
-- sends back, record each Error's body, and END our side (an endpoint nobody ends stays
-- DISCONNECTED_INBOUND and its messages pile up in the initiator queue); the dialogs it ends
-- are counted in ssbench_counts. RECEIVE returns the messages of one conversation group per
-- call (each dialog begun by ssbench_send_retiring is a group of its own), so one transaction
-- takes up to 100 groups, waiting only for the first. Activated on the initiator queue only
-- while a finite dialog lifetime is in use (ssbench_initiator_reader_on). An activated
-- procedure, like the target's: a TRY/CATCH records what failed and still commits what was
-- received (never a rollback: five in a row would disable the queue), so XACT_ABORT stays OFF;
-- no client can cancel it.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_initiator_end]
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @msgs TABLE (message_type sysname, [dialog] uniqueidentifier, message_body varbinary(max));
    DECLARE @dh uniqueidentifier, @rows int, @groups int, @ended int, @err nvarchar(4000);
    WHILE 1 = 1
    BEGIN
        SELECT @rows = NULL, @ended = 0;
        BEGIN TRY
            BEGIN TRANSACTION;
            WAITFOR (
                RECEIVE message_type_name, conversation_handle, message_body
                FROM [dbo].{{ident:queue}}
                INTO @msgs
            ), TIMEOUT 1000;
            SET @rows = @@ROWCOUNT;
            IF @rows = 0
            BEGIN
                ROLLBACK TRANSACTION;
                BREAK;
            END;
            SET @groups = 1;
            WHILE @groups < 100
            BEGIN
                -- (the ';' ends the statement before RECEIVE, which RECEIVE requires: after a bare
                -- BEGIN it would read as BEGIN RECEIVE)
                ;RECEIVE message_type_name, conversation_handle, message_body
                    FROM [dbo].{{ident:queue}}
                    INTO @msgs;
                IF @@ROWCOUNT = 0 BREAK;
                SET @groups = @groups + 1;
            END;
            INSERT INTO [dbo].[ssbench_dialog_errors] (received_at, [dialog], message_type, error, messageVal)
            SELECT SYSUTCDATETIME(), [dialog], message_type, N'Service Broker error message',
                   CAST(message_body AS varbinary(2000))
            FROM @msgs
            WHERE message_type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/Error',
                                   N'https://schemas.microsoft.com/SQL/ServiceBroker/Error');
            WHILE 1 = 1
            BEGIN
                SET @dh = NULL;
                SELECT TOP (1) @dh = [dialog] FROM @msgs;
                IF @dh IS NULL BREAK;
                END CONVERSATION @dh;
                SET @ended = @ended + 1;
                DELETE FROM @msgs WHERE [dialog] = @dh;
            END;
            UPDATE [dbo].[ssbench_counts] SET ended = ended + @ended WHERE spid = @@SPID;
            IF @@ROWCOUNT = 0
                INSERT INTO [dbo].[ssbench_counts] (spid, ended) VALUES (@@SPID, @ended);
            COMMIT TRANSACTION;
        END TRY
        BEGIN CATCH
            -- a doomed transaction is rolled back (its messages go back to the queue); otherwise
            -- what was received is kept with the error, one row per message not yet ended (or
            -- one row for the error alone), and committed, with the dialogs ended before the
            -- failure counted: they commit too
            SET @err = CONCAT(N'error ', ERROR_NUMBER(), N' at line ', ERROR_LINE(), N': ',
                              ERROR_MESSAGE());
            IF XACT_STATE() = -1 ROLLBACK TRANSACTION;
            IF XACT_STATE() = 1 AND @ended > 0
            BEGIN
                UPDATE [dbo].[ssbench_counts] SET ended = ended + @ended WHERE spid = @@SPID;
                IF @@ROWCOUNT = 0
                    INSERT INTO [dbo].[ssbench_counts] (spid, ended) VALUES (@@SPID, @ended);
            END;
            INSERT INTO [dbo].[ssbench_dialog_errors] (received_at, [dialog], message_type, error, messageVal)
            SELECT SYSUTCDATETIME(), m.[dialog], m.message_type, @err, CAST(m.message_body AS varbinary(2000))
            FROM (VALUES (1)) AS one (x)
            LEFT JOIN @msgs AS m ON XACT_STATE() = 1;
            IF XACT_STATE() = 1 COMMIT TRANSACTION;
            DELETE FROM @msgs;
            IF @rows IS NULL BREAK;
        END CATCH;
    END;
END;

-- @@ initiator_reader_procedure
-- Turns the initiator queue's reader (ssbench_initiator_end) on when it is off: a sender calls
-- it before its first SEND with a finite dialog lifetime, the only case in which EndDialog
-- messages come back. prepare turns the reader off (initiator_end_off) and renders this
-- procedure with the permutation's MAX_QUEUE_READERS. EXECUTE AS OWNER: the sender needs
-- EXECUTE only.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_initiator_reader_on]
WITH EXECUTE AS OWNER
AS
BEGIN
    SET NOCOUNT ON;
    IF NOT EXISTS (SELECT * FROM sys.service_queues
                   WHERE name = {{lit:queue}} AND schema_id = SCHEMA_ID(N'dbo')
                     AND is_activation_enabled = 1)
        ALTER QUEUE [dbo].{{ident:queue}}
            WITH ACTIVATION (
                STATUS = ON,
                PROCEDURE_NAME = [dbo].[ssbench_initiator_end],
                MAX_QUEUE_READERS = {{int:initiator_readers}},
                EXECUTE AS OWNER);
END;

-- @@ initiator_end_off
IF EXISTS (SELECT * FROM sys.service_queues
           WHERE name = {{lit:queue}} AND schema_id = SCHEMA_ID(N'dbo') AND is_activation_enabled = 1)
    ALTER QUEUE [dbo].{{ident:queue}} WITH ACTIVATION (STATUS = OFF);

-- @@ begin_dialog_procedure
-- BEGIN DIALOG from this database's service to the target's (its broker GUID is in
-- ssbench_config), on the high-priority contract when @high = 1 (a `priority` axis: the broker
-- priority [ssbench_high] raises it to PRIORITY_LEVEL = 10, objects.sql priority_objects),
-- else on the paper's. The one place ssbench_create_dialogs and ssbench_send_retiring begin
-- their dialogs; it runs in their security context (dbo: both are EXECUTE AS OWNER).
CREATE OR ALTER PROCEDURE [dbo].[ssbench_begin_dialog]
    @high bit,
    @dh uniqueidentifier OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @service_broker_guid nvarchar(128) =
        (SELECT value FROM [dbo].[ssbench_config] WHERE name = N'target_broker_guid');
    IF @high = 1
        BEGIN DIALOG @dh FROM SERVICE {{sbname:service}}
            TO SERVICE {{lit:service}}, @service_broker_guid
            ON CONTRACT [ssbench_high_priority]
            WITH ENCRYPTION = {{kw:dialog_encryption}};
    ELSE
        BEGIN DIALOG @dh FROM SERVICE {{sbname:service}}
            TO SERVICE {{lit:service}}, @service_broker_guid
            ON CONTRACT {{sbname:contract}}
            WITH ENCRYPTION = {{kw:dialog_encryption}};
END;

-- @@ create_dialogs_procedure
-- The paper's 150 trick: begin usable * every_n dialogs and keep every every_n-th one in
-- dbo.dialogs (every_n = 150: one usable dialog per 8 KB page of sys.sysdesend; every_n = 1:
-- one dialog per client thread). Each BEGIN DIALOG commits on its own, as in the paper.
-- EXECUTE AS OWNER: dialogs are begun by dbo, the owner of the initiating service, whose
-- certificate dialog security uses, whichever db_owner member calls the procedure.
-- Priority: @high_permille / 1000 of the usable slots, spread evenly (slot k is high when
-- k * p / 1000 > (k - 1) * p / 1000 in integer arithmetic, as harness.matrix.high_priority_slot
-- computes it for the load generator), are begun on [ssbench_high_priority], which the broker
-- priority [ssbench_high] raises to PRIORITY_LEVEL = 10 (objects.sql priority_objects); the
-- 150 trick's dialogs begun for slot k share its priority.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_create_dialogs]
    @usable int,
    @every_n int,
    @high_permille int = 0
WITH EXECUTE AS OWNER
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @service_broker_guid nvarchar(128) =
        (SELECT value FROM [dbo].[ssbench_config] WHERE name = N'target_broker_guid');
    IF @service_broker_guid IS NULL
    BEGIN
        RAISERROR(N'ssbench_config has no target_broker_guid: provision the topology first', 16, 1);
        RETURN;
    END;
    DECLARE @i int, @k int, @slot int, @high bit, @dh uniqueidentifier,
            @total int = @usable * @every_n;
    TRUNCATE TABLE [dbo].[dialogs];
    SELECT @i = 0, @k = 0;
    WHILE (@i < @total)
    BEGIN
        SET @i = @i + 1;
        SET @slot = (@i + @every_n - 1) / @every_n;
        SET @high = CASE WHEN @slot * @high_permille / 1000 > (@slot - 1) * @high_permille / 1000
                         THEN 1 ELSE 0 END;
        EXEC [dbo].[ssbench_begin_dialog] @high, @dh OUTPUT;
        IF ((@i % @every_n) = 0)
        BEGIN
            SET @k = @k + 1;
            INSERT INTO [dbo].[dialogs] (k, handle, high) VALUES (@k, @dh, @high);
        END;
    END;
    SELECT @i AS dialogs_begun;
END;

-- @@ warm_up_procedure
-- The paper's warm-up: one short message on every conversation begun here, so the target's
-- receive-side rows (sys.sysdercv) exist before the measurement. The 50-byte body is marked
-- 'SSBW' so the target does not count it as a measured message.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_warm_up]
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @dh uniqueidentifier, @i bigint = 0;
    DECLARE @s varbinary(50) =
        {{hex:warmup_prefix}}
        + CAST(CONVERT(char(27), SYSUTCDATETIME(), 121) AS varbinary(27))
        + 0x3B
        + CAST(REPLICATE('x', 14) AS varbinary(14));
    DECLARE conv CURSOR LOCAL STATIC READ_ONLY FOR
        SELECT ce.conversation_handle
        FROM sys.conversation_endpoints AS ce
        WHERE ce.is_initiator = 1 AND ce.far_service = {{lit:service}}
          AND ce.state IN ('SO', 'CO');
    OPEN conv;
    FETCH NEXT FROM conv INTO @dh;
    WHILE @@FETCH_STATUS = 0
    BEGIN
        ;SEND ON CONVERSATION @dh MESSAGE TYPE {{sbname:message_type}} (@s);
        FETCH NEXT FROM conv INTO @dh;
        SET @i = @i + 1;
    END;
    CLOSE conv;
    DEALLOCATE conv;
    SELECT @i AS messages_sent;
END;

-- @@ reset_procedure
-- Between permutations: end every conversation of the service (ssbench_end_conversations,
-- objects.sql; this also drops its messages from sys.transmission_queue), forget the
-- dialogs and empty the counts.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_reset]
AS
BEGIN
    SET NOCOUNT ON;
    EXEC [dbo].[ssbench_end_conversations];
    TRUNCATE TABLE [dbo].[dialogs];
    TRUNCATE TABLE [dbo].[ssbench_counts];
    TRUNCATE TABLE [dbo].[ssbench_dialog_errors];
END;

-- @@ truncate_tables
-- reset: new_broker (NEW_BROKER removed every conversation already)
TRUNCATE TABLE [dbo].[dialogs];
TRUNCATE TABLE [dbo].[ssbench_counts];
TRUNCATE TABLE [dbo].[ssbench_dialog_errors];

-- @@ call_create_dialogs
EXEC [dbo].[ssbench_create_dialogs] @usable = ?, @every_n = ?, @high_permille = ?;

-- @@ call_warm_up
EXEC [dbo].[ssbench_warm_up];

-- @@ call_send
EXEC [dbo].[ssbench_send] @dh = ?, @payload = ?;

-- @@ call_send_retiring
EXEC [dbo].[ssbench_send_retiring] @dh = ?, @payload = ?, @last = ?, @fire_and_forget = ?, @high = ?;

-- @@ call_initiator_reader_on
EXEC [dbo].[ssbench_initiator_reader_on];

-- @@ dialog_handle
-- slot k's dialog and whether it was begun at high priority
SELECT CAST(handle AS nvarchar(36)), high FROM [dbo].[dialogs] WHERE k = ?;

-- @@ sent_counts
-- The SEND path's own accounting (ssbench_counts): committed SENDs, dialogs begun and ended.
-- The caller subtracts what it read after creating dialogs and warming up.
SELECT ISNULL(SUM(sent), 0), ISNULL(SUM(begun), 0), ISNULL(SUM(ended), 0)
FROM [dbo].[ssbench_counts];

-- @@ sent_counts_live
-- The same for the collectors, every tick while senders run: WITH (NOLOCK), so the read never
-- waits on a SEND's open transaction (its LCK_M_S would land in the waits the diagnosis reads).
-- A SEND not yet committed may be counted: a rate, not the accounting (sent_counts).
SELECT ISNULL(SUM(sent), 0), ISNULL(SUM(begun), 0), ISNULL(SUM(ended), 0)
FROM [dbo].[ssbench_counts] WITH (NOLOCK);

-- @@ xmitq_data
-- This initiator's measured data messages still in its transmission queue: not EndDialog or
-- Error messages, not warm-up messages, not another service's (a DBA's database has its own).
-- A body the view does not show (NULL) counts as measured.
SELECT COUNT_BIG(*) FROM sys.transmission_queue
WHERE to_service_name = {{lit:service}} AND message_type_name = {{lit:message_type}}
  AND (message_body IS NULL OR SUBSTRING(message_body, 1, 4) <> 0x53534257);

-- @@ dialog_errors_received
-- Error messages the target sent back that ssbench_initiator_end received and recorded (READPAST:
-- rows only inserted; one the reader has not committed yet is skipped, never waited on).
SELECT COUNT_BIG(*) FROM [dbo].[ssbench_dialog_errors] WITH (READPAST)
WHERE error = N'Service Broker error message';

-- @@ sender_user_of
-- The user the sender login maps to in this database (by SID), if any.
SELECT dp.name
FROM sys.database_principals AS dp
JOIN sys.server_principals AS sp ON sp.sid = dp.sid
WHERE sp.name = ?;

-- @@ sender_user
-- The sender login's user in this initiator database, when it has none (ssbench records it
-- and teardown drops it).
IF NOT EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    CREATE USER {{ident:user}} FOR LOGIN {{ident:login}};

-- @@ sender_grants
-- What the load's sessions need: EXECUTE on the procedures they call (the SEND and the
-- ssbench_counts update inside ssbench_send are reached through its ownership chain; the
-- retiring ones run EXECUTE AS OWNER), SELECT on dbo.dialogs (a slot's handle) and RECEIVE on
-- the initiator's queue (SEND requires RECEIVE on the queue of the sending service).
-- CREATE OR ALTER PROCEDURE keeps these grants when prepare re-creates the procedures.
GRANT EXECUTE ON OBJECT::[dbo].[ssbench_send] TO {{ident:user}};
GRANT EXECUTE ON OBJECT::[dbo].[ssbench_send_retiring] TO {{ident:user}};
GRANT EXECUTE ON OBJECT::[dbo].[ssbench_initiator_reader_on] TO {{ident:user}};
GRANT SELECT ON OBJECT::[dbo].[dialogs] TO {{ident:user}};
GRANT RECEIVE ON OBJECT::[dbo].{{ident:queue}} TO {{ident:user}};

-- @@ sender_user_drop
-- teardown: the sender's user, when ssbench created it
IF EXISTS (SELECT * FROM sys.database_principals WHERE name = {{lit:user}})
    DROP USER {{ident:user}};

-- @@ check_sender
-- ssbench mssql check, connected as the sender login: its calls in a transaction that is rolled
-- back (a dialog begun by ssbench_send_retiring, as dbo, then a SEND on it by ssbench_send, as
-- the sender), nothing left behind. Returns the error (NULL: it worked) and whether the sender
-- may turn the initiator queue's reader on (a finite dialog lifetime).
SET XACT_ABORT ON;
DECLARE @h TABLE (next_handle nvarchar(36));
DECLARE @dh uniqueidentifier, @k int, @err nvarchar(4000);
BEGIN TRY
    BEGIN TRANSACTION;
    SET @k = (SELECT TOP (1) k FROM [dbo].[dialogs]);
    INSERT INTO @h EXEC [dbo].[ssbench_send_retiring] @dh = NULL, @payload = 0x, @last = 0, @fire_and_forget = 0;
    SET @dh = (SELECT TOP (1) CAST(next_handle AS uniqueidentifier) FROM @h);
    EXEC [dbo].[ssbench_send] @dh = @dh, @payload = 0x;
    ROLLBACK TRANSACTION;
END TRY
BEGIN CATCH
    SET @err = CONCAT(N'error ', ERROR_NUMBER(), N': ', ERROR_MESSAGE());
    IF XACT_STATE() <> 0 ROLLBACK TRANSACTION;
END CATCH;
SELECT @err, HAS_PERMS_BY_NAME(N'dbo.ssbench_initiator_reader_on', N'OBJECT', N'EXECUTE');
