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

-- @@ send_procedure
-- One SEND on the caller's dialog, in its own transaction (the caller runs in autocommit
-- mode). The body is the header (initiator number, send time) then the caller's payload
-- from byte 37 on, so the message is as long as the payload (at least 36 bytes).
CREATE OR ALTER PROCEDURE [dbo].[ssbench_send]
    @dh uniqueidentifier,
    @payload varbinary(max)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @body varbinary(max) =
        {{hex:data_prefix}}
        + CAST(CONVERT(char(27), SYSUTCDATETIME(), 121) AS varbinary(27))
        + 0x3B
        + ISNULL(SUBSTRING(@payload, 37, DATALENGTH(@payload)), 0x);
    SEND ON CONVERSATION @dh MESSAGE TYPE {{sbname:message_type}} (@body);
END;

-- @@ send_retiring_procedure
-- A finite dialog lifetime (the messages_per_dialog axis, docs/matrices.md), still one call
-- per SEND: BEGIN DIALOG first when @dh is NULL, SEND, and on the dialog's last message
-- (@last = 1) either END CONVERSATION at once (@fire_and_forget = 1: the initiator ends first,
-- so an Error the target sends back reaches an endpoint nobody RECEIVEs on) or mark the body
-- 'SSBL' so the target ends the dialog after processing it and the initiator ends its side
-- when that EndDialog arrives (ssbench_initiator_end), the pattern the seeds recommend.
-- Returns the handle to send on next, NULL once the dialog is retired. dbo.ssbench_send stays
-- the call of the unlimited (reuse) case, unchanged. EXECUTE AS OWNER: as for create_dialogs.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_send_retiring]
    @dh uniqueidentifier,
    @payload varbinary(max),
    @last bit,
    @fire_and_forget bit
WITH EXECUTE AS OWNER
AS
BEGIN
    SET NOCOUNT ON;
    BEGIN TRANSACTION;
    IF @dh IS NULL
    BEGIN
        DECLARE @service_broker_guid nvarchar(128) =
            (SELECT value FROM [dbo].[ssbench_config] WHERE name = N'target_broker_guid');
        BEGIN DIALOG @dh FROM SERVICE {{sbname:service}}
            TO SERVICE {{lit:service}}, @service_broker_guid
            ON CONTRACT {{sbname:contract}}
            WITH ENCRYPTION = {{kw:dialog_encryption}};
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
        END CONVERSATION @dh;
    COMMIT TRANSACTION;
    SELECT CASE WHEN @last = 1 THEN NULL ELSE CAST(@dh AS nvarchar(36)) END AS next_handle;
END;

-- @@ initiator_end_procedure
-- The initiator service's queue reader: RECEIVE the EndDialog and Error messages the target
-- sends back and END our side (an endpoint nobody ends stays DISCONNECTED_INBOUND and its
-- messages pile up in the initiator queue). Activated on the initiator queue when a dialog
-- lifetime is finite; one transaction per RECEIVE.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_initiator_end]
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @ends TABLE (message_type sysname, [dialog] uniqueidentifier);
    DECLARE @dh uniqueidentifier;
    WHILE 1 = 1
    BEGIN
        BEGIN TRANSACTION;
        WAITFOR (
            RECEIVE TOP (1000) message_type_name, conversation_handle
            FROM [dbo].{{ident:queue}}
            INTO @ends
        ), TIMEOUT 1000;
        IF @@ROWCOUNT = 0
        BEGIN
            ROLLBACK TRANSACTION;
            BREAK;
        END;
        WHILE 1 = 1
        BEGIN
            SET @dh = NULL;
            SELECT TOP (1) @dh = [dialog] FROM @ends;
            IF @dh IS NULL BREAK;
            END CONVERSATION @dh;
            DELETE FROM @ends WHERE [dialog] = @dh;
        END;
        COMMIT TRANSACTION;
    END;
END;

-- @@ initiator_end_on
ALTER QUEUE [dbo].{{ident:queue}}
    WITH ACTIVATION (
        STATUS = ON,
        PROCEDURE_NAME = [dbo].[ssbench_initiator_end],
        MAX_QUEUE_READERS = 1,
        EXECUTE AS OWNER);

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
-- Between permutations: end every conversation of the service WITH CLEANUP (this also drops
-- its messages from sys.transmission_queue) and forget the dialogs.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_reset]
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @dh uniqueidentifier, @n int = 0;
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
        END CONVERSATION @dh WITH CLEANUP;
        SET @n = @n + 1;
        IF @n % 1000 = 0
        BEGIN
            COMMIT TRANSACTION;
            BEGIN TRANSACTION;
        END;
        FETCH NEXT FROM conv INTO @dh;
    END;
    COMMIT TRANSACTION;
    CLOSE conv;
    DEALLOCATE conv;
    TRUNCATE TABLE [dbo].[dialogs];
    SELECT @n AS conversations_ended;
END;

-- @@ truncate_dialogs
TRUNCATE TABLE [dbo].[dialogs];

-- @@ call_create_dialogs
EXEC [dbo].[ssbench_create_dialogs] @usable = ?, @every_n = ?, @high_permille = ?;

-- @@ call_warm_up
EXEC [dbo].[ssbench_warm_up];

-- @@ call_send
EXEC [dbo].[ssbench_send] @dh = ?, @payload = ?;

-- @@ call_send_retiring
EXEC [dbo].[ssbench_send_retiring] @dh = ?, @payload = ?, @last = ?, @fire_and_forget = ?;

-- @@ dialog_handle
SELECT CAST(handle AS nvarchar(36)) FROM [dbo].[dialogs] WHERE k = ?;

-- @@ sent_sequence
-- Messages sent on this database's dialogs to the target service: SEND advances
-- send_sequence in sys.sysdesend in the sending transaction, so committed sends only.
-- The caller subtracts the value it read after creating dialogs and warming up.
SELECT ISNULL(SUM(ce.send_sequence), 0), COUNT_BIG(*)
FROM sys.conversation_endpoints AS ce
WHERE ce.is_initiator = 1 AND ce.far_service = ?;
