-- ssbench: the target database (the paper's "SSB Target"): the drop table, the per-RECEIVE
-- tally, the error table, the receive activation procedure and the queue's activation.
-- Placeholders: see server.sql.
--
-- Message bodies (stamped by the initiator's dbo.ssbench_send, initiator.sql):
--   bytes 1-4   'SSB1' (a measured message), 'SSBL' (a measured message, the last of its
--               dialog: the target ends the dialog) or 'SSBW' (a warm-up message)
--   bytes 5-7   initiator number, 3 ASCII digits ('001')
--   byte  8     ';'
--   bytes 9-35  send time, SYSUTCDATETIME() on the initiator, CONVERT style 121
--               ('yyyy-mm-dd hh:mi:ss.fffffff', 27 characters)
--   byte  36    ';'
--   bytes 37-   the rest of the client's payload

-- @@ tables
-- Tables of an older ssbench (messageDrop with a clustered key, receiveTally without
-- batch_messages) are dropped and re-created: every permutation empties them anyway.
IF EXISTS (SELECT * FROM sys.indexes WHERE object_id = OBJECT_ID(N'[dbo].[messageDrop]') AND index_id = 1)
    DROP TABLE [dbo].[messageDrop];
IF OBJECT_ID(N'[dbo].[receiveTally]', N'U') IS NOT NULL
   AND COL_LENGTH(N'dbo.receiveTally', N'batch_messages') IS NULL
    DROP TABLE [dbo].[receiveTally];
GO
-- The paper's drop table (first 2,000 bytes of every message), with the initiator, the send
-- time and the receive time so end-to-end latency and per-initiator receipt can be computed.
-- A heap: no IDENTITY clustered key, whose last page 16 receive tasks inserting 10,000-row
-- batches would all latch (PAGELATCH_EX); heap inserts spread over pages with free space
-- (PFS), so the target's top wait stays the log flush (WRITELOG), as the paper reports.
IF OBJECT_ID(N'[dbo].[messageDrop]', N'U') IS NULL
    CREATE TABLE [dbo].[messageDrop] (
        initiator smallint NOT NULL,
        sent_at datetime2(7) NOT NULL,
        received_at datetime2(7) NOT NULL,
        warmup bit NOT NULL,
        messageVal varbinary(2000) NULL);
GO
-- high: the message came on a dialog begun at high priority (a `priority` axis: the contract
-- [ssbench_high_priority]), so end-to-end latency can be split by priority
IF COL_LENGTH(N'[dbo].[messageDrop]', N'high') IS NULL
    ALTER TABLE [dbo].[messageDrop] ADD high bit NOT NULL DEFAULT 0;
GO
-- [dialog] and seq: the target's conversation handle and the message's sequence number in it
-- (RECEIVE's message_sequence_number) identify a message, so the accounting counts a message
-- once however often it was tallied, and one in the error table as poison only when it never
-- reached this table
IF COL_LENGTH(N'[dbo].[messageDrop]', N'seq') IS NULL
    ALTER TABLE [dbo].[messageDrop] ADD [dialog] uniqueidentifier NULL, seq bigint NULL;
GO
-- The paper's tally: messages processed by each WAITFOR - RECEIVE and when. Every RECEIVE
-- that returned messages writes at least one row: one per initiator whose data messages it
-- received, and one with initiator NULL for the rest (EndDialog, Error, messages without a
-- valid header), so a RECEIVE of only EndDialog or Error messages is counted too.
-- batch_messages is the RECEIVE's whole size (@@ROWCOUNT), on each of its rows.
IF OBJECT_ID(N'[dbo].[receiveTally]', N'U') IS NULL
    CREATE TABLE [dbo].[receiveTally] (
        id bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY CLUSTERED,
        received_at datetime2(7) NOT NULL,
        initiator smallint NULL,
        messages int NOT NULL,
        warmup_messages int NOT NULL,
        batch_messages int NOT NULL);
GO
-- finished_at: when the procedure's processing of the RECEIVE ended (before its COMMIT), so the
-- diagnosis can tell the procedure's own work from the RECEIVE (docs/diagnosis.md)
IF COL_LENGTH(N'[dbo].[receiveTally]', N'finished_at') IS NULL
    ALTER TABLE [dbo].[receiveTally] ADD finished_at datetime2(7) NULL;
-- (The paper's user-defined error table, dbo.messageErrors: objects.sql error_table.)

-- @@ activation_procedure
-- The paper's receive activation procedure, set-based: RECEIVE TOP (n) into a table variable
-- with WAITFOR ... TIMEOUT, one transaction per RECEIVE that always commits. A message that
-- cannot be parsed goes to the error table (never a rollback: five rollbacks in a row would
-- disable the queue). EndDialog and Error messages end the conversation.
CREATE OR ALTER PROCEDURE [dbo].{{ident:activation_procedure}}
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @receive TABLE (
        message_type sysname,
        message_body varbinary(max),
        [dialog] uniqueidentifier,
        contract sysname,
        seq bigint);
    DECLARE @rows int, @data int, @now datetime2(7), @dh uniqueidentifier, @err nvarchar(4000);
    DECLARE @work datetime;

    -- Loop calling RECEIVE; leave after a timeout with no messages.
    WHILE 1 = 1
    BEGIN
        SET @rows = NULL;
        BEGIN TRY
            -- The transaction includes the RECEIVE, the processing and the writes.
            BEGIN TRANSACTION;
            -- Receive up to receive_top messages, wait up to waitfor_timeout_ms for them.
            WAITFOR (
                RECEIVE TOP ({{int:receive_top}})
                    message_type_name,
                    message_body,
                    conversation_handle,
                    service_contract_name,
                    message_sequence_number
                FROM [dbo].{{ident:queue}}
                INTO @receive
            ), TIMEOUT {{int:waitfor_timeout_ms}};
            SET @rows = @@ROWCOUNT;
            -- No messages: leave the procedure (the queue monitor starts it again).
            IF @rows = 0
            BEGIN
                ROLLBACK TRANSACTION;
                BREAK;
            END;
            SET @now = SYSUTCDATETIME();

            -- Copy the first 2,000 bytes of every data message to the drop table.
            INSERT INTO [dbo].[messageDrop] (initiator, sent_at, received_at, warmup, messageVal, high,
                                             [dialog], seq)
            SELECT h.initiator, h.sent_at, @now, h.warmup, CAST(r.message_body AS varbinary(2000)),
                   CASE WHEN r.contract = N'ssbench_high_priority' THEN 1 ELSE 0 END, r.[dialog], r.seq
            FROM @receive AS r
            CROSS APPLY (SELECT
                CASE SUBSTRING(r.message_body, 1, 4)
                    WHEN 0x53534231 THEN CAST(0 AS bit)   -- 'SSB1'
                    WHEN 0x5353424C THEN CAST(0 AS bit)   -- 'SSBL': the last of its dialog
                    WHEN 0x53534257 THEN CAST(1 AS bit)   -- 'SSBW'
                END AS warmup,
                TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(r.message_body, 5, 3))) AS initiator,
                TRY_CONVERT(datetime2(7),
                            RTRIM(CONVERT(varchar(27), SUBSTRING(r.message_body, 9, 27))), 121) AS sent_at
            ) AS h
            WHERE r.message_type = {{lit:message_type}}
              AND h.warmup IS NOT NULL AND h.initiator IS NOT NULL AND h.sent_at IS NOT NULL;
            SET @data = @@ROWCOUNT;   -- data messages with a valid header

            -- The procedure's own work per message (broker.processing_us_per_message: I/O or a
            -- remote call per message, modelled as a wait inside the transaction).
            IF {{int:processing_us_per_message}} > 0 AND @data > 0
            BEGIN
                SET @work = DATEADD(millisecond, CEILING(CAST(@data AS bigint)
                                                         * {{int:processing_us_per_message}} / 1000.0),
                                    CAST(0 AS datetime));
                WAITFOR DELAY @work;
            END;

            -- The tally: this RECEIVE's data messages per initiator, and a row (initiator
            -- NULL) when it also held others (EndDialog, Error, bad headers), so every
            -- RECEIVE leaves at least one row.
            INSERT INTO [dbo].[receiveTally] (received_at, initiator, messages, warmup_messages,
                                              batch_messages, finished_at)
            SELECT @now, h.initiator, COUNT(*), SUM(CASE WHEN h.warmup = 1 THEN 1 ELSE 0 END), @rows,
                   SYSUTCDATETIME()
            FROM @receive AS r
            CROSS APPLY (SELECT
                CASE SUBSTRING(r.message_body, 1, 4)
                    WHEN 0x53534231 THEN CAST(0 AS bit)
                    WHEN 0x5353424C THEN CAST(0 AS bit)
                    WHEN 0x53534257 THEN CAST(1 AS bit)
                END AS warmup,
                TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(r.message_body, 5, 3))) AS initiator,
                TRY_CONVERT(datetime2(7),
                            RTRIM(CONVERT(varchar(27), SUBSTRING(r.message_body, 9, 27))), 121) AS sent_at
            ) AS h
            WHERE r.message_type = {{lit:message_type}}
              AND h.warmup IS NOT NULL AND h.initiator IS NOT NULL AND h.sent_at IS NOT NULL
            GROUP BY h.initiator;
            IF @data < @rows
                INSERT INTO [dbo].[receiveTally] (received_at, initiator, messages, warmup_messages,
                                                  batch_messages, finished_at)
                VALUES (@now, NULL, 0, 0, @rows, SYSUTCDATETIME());

            -- Bad messages (no parsable header) and Service Broker Error messages: error table.
            INSERT INTO [dbo].[messageErrors] (received_at, [dialog], seq, message_type, error, messageVal)
            SELECT @now, r.[dialog], r.seq, r.message_type,
                   CASE WHEN r.message_type = {{lit:message_type}}
                        THEN N'message without a valid ssbench header'
                        ELSE N'Service Broker error message' END,
                   CAST(r.message_body AS varbinary(2000))
            FROM @receive AS r
            CROSS APPLY (SELECT
                CASE SUBSTRING(r.message_body, 1, 4)
                    WHEN 0x53534231 THEN CAST(0 AS bit)
                    WHEN 0x5353424C THEN CAST(0 AS bit)
                    WHEN 0x53534257 THEN CAST(1 AS bit)
                END AS warmup,
                TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(r.message_body, 5, 3))) AS initiator,
                TRY_CONVERT(datetime2(7),
                            RTRIM(CONVERT(varchar(27), SUBSTRING(r.message_body, 9, 27))), 121) AS sent_at
            ) AS h
            WHERE (r.message_type = {{lit:message_type}}
                   AND (h.warmup IS NULL OR h.initiator IS NULL OR h.sent_at IS NULL))
               OR r.message_type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/Error',
                                     N'https://schemas.microsoft.com/SQL/ServiceBroker/Error');

            -- The last message of its dialog ('SSBL', messages_per_dialog): the target ends
            -- the dialog (its EndDialog tells the initiator, which ends its side).
            WHILE 1 = 1
            BEGIN
                SET @dh = NULL;
                SELECT TOP (1) @dh = [dialog] FROM @receive
                WHERE message_type = {{lit:message_type}} AND SUBSTRING(message_body, 1, 4) = 0x5353424C;
                IF @dh IS NULL BREAK;
                END CONVERSATION @dh;
                DELETE FROM @receive WHERE [dialog] = @dh;
            END;

            -- EndDialog and Error messages: end our side of the conversation. (Books Online
            -- shows these names with https://; the names SQL Server uses begin http://.)
            WHILE 1 = 1
            BEGIN
                SET @dh = NULL;
                SELECT TOP (1) @dh = [dialog] FROM @receive
                WHERE message_type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
                                       N'https://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
                                       N'http://schemas.microsoft.com/SQL/ServiceBroker/Error',
                                       N'https://schemas.microsoft.com/SQL/ServiceBroker/Error');
                IF @dh IS NULL BREAK;
                END CONVERSATION @dh;
                DELETE FROM @receive WHERE [dialog] = @dh;
            END;

            DELETE FROM @receive;
            COMMIT TRANSACTION;
        END TRY
        BEGIN CATCH
            SET @err = CONCAT(N'error ', ERROR_NUMBER(), N' at line ', ERROR_LINE(), N': ',
                              ERROR_MESSAGE());
            IF XACT_STATE() = 1
            BEGIN
                -- Never roll back: log what was received and commit (the paper's tech-tip).
                -- Data messages processed before the failure are in messageDrop too: the
                -- accounting counts them as received, not as poison.
                INSERT INTO [dbo].[messageErrors] (received_at, [dialog], seq, message_type, error, messageVal)
                SELECT SYSUTCDATETIME(), [dialog], seq, message_type, @err,
                       CAST(message_body AS varbinary(2000))
                FROM @receive;
                IF @@ROWCOUNT = 0
                    INSERT INTO [dbo].[messageErrors] (received_at, error) VALUES (SYSUTCDATETIME(), @err);
                COMMIT TRANSACTION;
            END
            ELSE
            BEGIN
                -- A doomed transaction cannot commit: roll back (the messages go back to the
                -- queue) and log the error outside it.
                IF XACT_STATE() <> 0 ROLLBACK TRANSACTION;
                INSERT INTO [dbo].[messageErrors] (received_at, error) VALUES (SYSUTCDATETIME(), @err);
            END;
            DELETE FROM @receive;
            -- The RECEIVE itself failed (e.g. the queue is disabled): stop.
            IF @rows IS NULL BREAK;
        END CATCH;
    END;
END;

-- @@ activation_on
-- The paper: MAX_QUEUE_READERS receive tasks, EXECUTE AS OWNER.
ALTER QUEUE [dbo].{{ident:queue}}
    WITH STATUS = ON,
         ACTIVATION (
             STATUS = ON,
             PROCEDURE_NAME = [dbo].{{ident:activation_procedure}},
             MAX_QUEUE_READERS = {{int:max_queue_readers}},
             EXECUTE AS OWNER);

-- @@ activation_off
ALTER QUEUE [dbo].{{ident:queue}} WITH ACTIVATION (STATUS = OFF);

-- @@ queue_enable
-- Poison-message detection sets STATUS = OFF after five rollbacks in a row.
ALTER QUEUE [dbo].{{ident:queue}} WITH STATUS = ON;

-- @@ reset_procedure
-- Between permutations: end every conversation of the service (ssbench_end_conversations,
-- objects.sql) and empty ssbench's tables.
CREATE OR ALTER PROCEDURE [dbo].[ssbench_reset]
AS
BEGIN
    SET NOCOUNT ON;
    EXEC [dbo].[ssbench_end_conversations];
    TRUNCATE TABLE [dbo].[messageDrop];
    TRUNCATE TABLE [dbo].[receiveTally];
    TRUNCATE TABLE [dbo].[messageErrors];
END;

-- @@ truncate_tables
TRUNCATE TABLE [dbo].[messageDrop];
TRUNCATE TABLE [dbo].[receiveTally];
TRUNCATE TABLE [dbo].[messageErrors];

-- @@ received_by_initiator
-- The tally per initiator: measured and warm-up data messages processed (one row per RECEIVE
-- and initiator: cheap to read while the queues still hold messages).
SELECT initiator, SUM(CAST(messages - warmup_messages AS bigint)), SUM(CAST(warmup_messages AS bigint))
FROM [dbo].[receiveTally]
WHERE initiator IS NOT NULL
GROUP BY initiator;

-- @@ distinct_by_initiator
-- Measured messages in the drop table per initiator: rows, and distinct messages (a message is
-- its conversation and sequence number): rows beyond a message's first are duplicates. It reads
-- the whole table: the accounting asks once the queues hold none of the test's messages.
SELECT d.initiator, SUM(d.n), COUNT_BIG(*)
FROM (SELECT initiator, [dialog], seq, COUNT_BIG(*) AS n
      FROM [dbo].[messageDrop]
      WHERE warmup = 0
      GROUP BY initiator, [dialog], seq) AS d
GROUP BY d.initiator;

-- @@ gaps_by_initiator
-- Per initiator, the sequence numbers missing inside each conversation's received sequence:
-- every number from the first to the last the target holds (messageDrop, warm-up included, and
-- every messageErrors row that names its message) must be there, since a dialog's messages are
-- numbered without a gap. A message lost there is a gap even when the totals match; a dialog's
-- lost first or last message is not seen here (the totals see it), and a message recorded under
-- a number past its dialog's last reads as gaps too. Read whole once the queues hold none of
-- the test's messages, like distinct_by_initiator.
SELECT g.initiator, SUM(g.hi - g.lo + 1 - g.n)
FROM (SELECT MIN(k.initiator) AS initiator, MIN(k.seq) AS lo, MAX(k.seq) AS hi, COUNT_BIG(DISTINCT k.seq) AS n
      FROM (SELECT d.initiator, d.[dialog], d.seq
            FROM [dbo].[messageDrop] AS d
            WHERE d.[dialog] IS NOT NULL AND d.seq IS NOT NULL
            UNION ALL
            SELECT TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(e.messageVal, 5, 3))), e.[dialog], e.seq
            FROM [dbo].[messageErrors] AS e
            WHERE e.[dialog] IS NOT NULL AND e.seq IS NOT NULL) AS k
      GROUP BY k.[dialog]) AS g
WHERE g.initiator IS NOT NULL
GROUP BY g.initiator;

-- @@ poison_by_initiator
-- Measured data messages in the error table that never reached the drop table, per initiator
-- (from the message header). Left out: Service Broker Error and EndDialog messages, rows of an
-- error alone (a RECEIVE that failed; a doomed transaction rolled back, its messages back in
-- the queue and received again later), messages without a valid header (nobody's) and data
-- messages processed before a later statement failed (in messageDrop too: received).
SELECT x.initiator, COUNT_BIG(*)
FROM (SELECT DISTINCT e.[dialog], e.seq,
             TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(e.messageVal, 5, 3))) AS initiator
      FROM [dbo].[messageErrors] AS e
      WHERE e.message_type = {{lit:message_type}} AND e.[dialog] IS NOT NULL AND e.seq IS NOT NULL
        AND SUBSTRING(e.messageVal, 1, 4) IN (0x53534231, 0x5353424C)
        AND NOT EXISTS (SELECT * FROM [dbo].[messageDrop] AS d
                        WHERE d.[dialog] = e.[dialog] AND d.seq = e.seq)) AS x
WHERE x.initiator IS NOT NULL
GROUP BY x.initiator;

-- @@ queued_by_initiator
-- Measured data messages still in the target queue, per initiator (WITH (NOLOCK): a SELECT on a
-- queue must not block its readers, "Querying Queues"). EndDialog and Error messages and
-- warm-up messages are not counted.
SELECT TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(message_body, 5, 3))), COUNT_BIG(*)
FROM [dbo].{{ident:queue}} WITH (NOLOCK)
WHERE message_type_name = {{lit:message_type}}
  AND SUBSTRING(message_body, 1, 4) IN (0x53534231, 0x5353424C)
GROUP BY TRY_CONVERT(smallint, CONVERT(varchar(3), SUBSTRING(message_body, 5, 3)));

-- @@ processed_total
-- Every tick (the throughput collector): READPAST skips the rows of RECEIVE transactions still
-- open, so the read never waits on a reader (an LCK_M_S in the measured waits); the tally is
-- only inserted into, so what it skips is exactly what has not committed yet.
SELECT ISNULL(SUM(CAST(messages - warmup_messages AS bigint)), 0) FROM [dbo].[receiveTally] WITH (READPAST);

-- @@ e2e_latencies
-- End-to-end latency of every measured message received in [start, end) (UTC), per initiator:
-- the target's receive time minus the initiator's send time (clock offsets are corrected by
-- the caller).
SELECT initiator, DATEDIFF_BIG(microsecond, sent_at, received_at)
FROM [dbo].[messageDrop]
WHERE warmup = 0 AND received_at >= ? AND received_at < ?;

-- @@ e2e_latencies_by_priority
-- The same, with whether each message came on a high-priority dialog (a `priority` axis).
SELECT initiator, DATEDIFF_BIG(microsecond, sent_at, received_at), high
FROM [dbo].[messageDrop]
WHERE warmup = 0 AND received_at >= ? AND received_at < ?;

-- @@ e2e_sent_latencies
-- The same, with each message's send time (the initiator's clock) in microseconds since 1970:
-- an alternated window (run.alternate) gives each strategy the messages sent in its slices.
SELECT initiator, DATEDIFF_BIG(microsecond, sent_at, received_at),
       DATEDIFF_BIG(microsecond, CAST('19700101' AS datetime2(7)), sent_at)
FROM [dbo].[messageDrop]
WHERE warmup = 0 AND received_at >= ? AND received_at < ?;

-- @@ queue_exact
SELECT COUNT_BIG(*) FROM [dbo].{{ident:queue}} WITH (NOLOCK);

-- @@ procedure_time
-- The activation procedure's own time (RECEIVE's return to the end of its processing, before
-- COMMIT) over [start, end) in the target's clock, for the diagnosis (docs/diagnosis.md): the
-- microseconds of it inside the window (every RECEIVE that overlaps it), and of the RECEIVEs that
-- returned inside it their whole time, their data messages and their count. One data row per
-- RECEIVE (a RECEIVE takes one conversation group: one initiator's dialog).
SELECT ISNULL(SUM(DATEDIFF_BIG(microsecond, IIF(received_at > ?, received_at, ?),
                               IIF(finished_at < ?, finished_at, ?))), 0),
       ISNULL(SUM(IIF(received_at >= ?, DATEDIFF_BIG(microsecond, received_at, finished_at), 0)), 0),
       ISNULL(SUM(IIF(received_at >= ?, CAST(messages - warmup_messages AS bigint), 0)), 0),
       COUNT_BIG(IIF(received_at >= ?, 1, NULL))
FROM [dbo].[receiveTally]
WHERE initiator IS NOT NULL AND finished_at IS NOT NULL AND received_at < ? AND finished_at > ?;
