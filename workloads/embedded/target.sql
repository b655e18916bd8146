-- ssbench embedded target: the TARGET side of the PostgreSQL emulation of Service Broker.
--
-- Loaded by harness/targets/embedded/target.py into the target database (ssb_target). The
-- whole file is (re)applied when its content changes: target.py drops schema ssb first.
--
-- This is PostgreSQL, not SQL Server. Names follow the SQL Server objects they stand in for
-- (sys.sysdercv, the service queue, the paper's dbo.messageDrop); docs/embedded.md says what is
-- reproduced and what is not.
--
-- Concurrency model
--   * The transport (broker process) enqueues messages with ssb.enqueue(): it locks the batch's
--     receive endpoints (sysdercv rows), accepts messages that extend each dialog's receive
--     sequence (rcv_seq, the high-water mark) without a gap, ignores duplicates, and returns the
--     high-water marks: the initiator deletes what they cover (the ACK). A crash anywhere
--     neither loses nor duplicates a message.
--   * RECEIVE locks one conversation group row (SELECT ... FOR UPDATE SKIP LOCKED) and takes
--     messages of that group only; the lock lasts until the receiving transaction ends, so two
--     readers never hold one group and other groups stay available. Nothing else takes that
--     lock (no foreign keys point at ssb.conversation_groups).

CREATE SCHEMA ssb;
COMMENT ON SCHEMA ssb IS 'ssbench: PostgreSQL emulation of Service Broker (target side)';

-- ------------------------------------------------------------------ tables

-- sys.service_queues + the queue's ACTIVATION clause. One queue: the paper's MySSBLabTestQueue.
CREATE TABLE ssb.queues (
    name                   text    PRIMARY KEY,
    is_receive_enabled     boolean NOT NULL DEFAULT true,   -- STATUS = ON | OFF
    is_activation_enabled  boolean NOT NULL DEFAULT true,   -- ACTIVATION (STATUS = ON | OFF)
    max_readers            integer NOT NULL DEFAULT 16 CHECK (max_readers >= 0),  -- MAX_QUEUE_READERS
    receive_top            integer NOT NULL DEFAULT 10000 CHECK (receive_top >= 1),
    waitfor_timeout_ms     integer NOT NULL DEFAULT 3000 CHECK (waitfor_timeout_ms >= 0),
    monitor_interval_s     float8  NOT NULL DEFAULT 5 CHECK (monitor_interval_s > 0),
    try_catch              boolean NOT NULL DEFAULT true,   -- activation procedure catches per message
    process_delay_ms       integer NOT NULL DEFAULT 0 CHECK (process_delay_ms >= 0),  -- test knob
    -- the activation procedure's own work per message (broker.processing_us_per_message)
    processing_us_per_message integer NOT NULL DEFAULT 0 CHECK (processing_us_per_message >= 0),
    consecutive_rollbacks  integer NOT NULL DEFAULT 0,
    rollbacks_total        bigint  NOT NULL DEFAULT 0,
    activation_errors      bigint  NOT NULL DEFAULT 0,
    last_error             text,
    disabled_at            timestamptz
);
INSERT INTO ssb.queues (name) VALUES ('MySSBLabTestQueue');

-- Conversation groups: RECEIVE's unit of locking. One group per dialog (SQL Server's default).
CREATE TABLE ssb.conversation_groups (
    group_id  uuid PRIMARY KEY
);

-- sys.sysdercv: the receive side of every dialog that reached this database.
CREATE TABLE ssb.sysdercv (
    diag_id     uuid     NOT NULL,             -- conversation id (from the initiator)
    initiator   smallint NOT NULL,             -- which initiator database the dialog comes from
    handle      uuid     NOT NULL,             -- this side's conversation handle
    conv_group  uuid     NOT NULL,
    rcv_seq     bigint   NOT NULL DEFAULT 0,   -- receive high-water mark: every message up to it was enqueued
    send_seq    bigint   NOT NULL DEFAULT 0,   -- messages sent back to the initiator (EndDialog)
    ack_seq     bigint   NOT NULL DEFAULT 0,
    state       char(2)  NOT NULL DEFAULT 'CO',
    dlgopened   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT sysdercv_pkey PRIMARY KEY (diag_id),
    CONSTRAINT sysdercv_handle_key UNIQUE (handle)
);

-- The service queue (MySSBLabTestQueue): messages enqueued, not yet received.
CREATE TABLE ssb.service_queue (
    queuing_order  bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conv_group     uuid     NOT NULL,
    handle         uuid     NOT NULL,
    diag_id        uuid     NOT NULL,
    initiator      smallint NOT NULL,
    msgseqnum      bigint   NOT NULL,
    msgtype        smallint NOT NULL,          -- 1 = //MySSB.com/Lab/M_Test, 2 = EndDialog
    msgbody        bytea    NOT NULL
);
CREATE INDEX service_queue_group ON ssb.service_queue (conv_group, queuing_order);

-- The target's transmission queue: messages going back to an initiator (EndDialog).
CREATE TABLE ssb.sysxmitqueue (
    to_initiator  smallint    NOT NULL,
    dlgid         uuid        NOT NULL,
    msgseqnum     bigint      NOT NULL,
    msgtype       smallint    NOT NULL,        -- 2 = EndDialog, 3 = Error (END CONVERSATION WITH ERROR)
    enqtime       timestamptz NOT NULL DEFAULT clock_timestamp(),
    msgbody       bytea       NOT NULL,
    CONSTRAINT sysxmitqueue_pkey PRIMARY KEY (dlgid, msgseqnum)
);
CREATE INDEX sysxmitqueue_to ON ssb.sysxmitqueue (to_initiator, enqtime);

-- The paper's dbo.messageDrop: the first 2,000 bytes of every processed message, plus what the
-- harness needs: initiator, dialog, sequence, send and receive times (microseconds since the
-- epoch, one clock), the RECEIVE batch and the position in it. No index: an insert-only heap,
-- like the paper's table.
CREATE TABLE ssb.message_drop (
    batch_id     bigint   NOT NULL,
    pos          integer  NOT NULL,
    initiator    smallint NOT NULL,
    diag_id      uuid     NOT NULL,
    msgseqnum    bigint   NOT NULL,
    sent_us      bigint   NOT NULL,
    received_us  bigint   NOT NULL,
    warmup       boolean  NOT NULL,
    message_val  bytea    NOT NULL
);

-- The paper's per-RECEIVE tally: one row per batch (message count and time processed).
CREATE TABLE ssb.receive_tally (
    id           bigint   GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    reader       text     NOT NULL,            -- application_name of the reader's session
    backend_pid  integer  NOT NULL,
    conv_group   uuid     NOT NULL,
    initiator    smallint,
    messages     integer  NOT NULL,            -- messages the RECEIVE returned
    processed    integer  NOT NULL,            -- written to the drop table (warm-up included)
    warmup       integer  NOT NULL,
    errors       integer  NOT NULL,            -- poison messages sent to the error table
    end_dialogs  integer  NOT NULL,
    received_us  bigint   NOT NULL,            -- when RECEIVE returned
    finished_us  bigint   NOT NULL             -- when processing ended (before COMMIT)
);

-- User-defined error table (the paper's TRY/CATCH tech tip): messages that could not be processed.
CREATE TABLE ssb.message_errors (
    id             bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id       bigint   NOT NULL,
    initiator      smallint NOT NULL,
    diag_id        uuid     NOT NULL,
    msgseqnum      bigint   NOT NULL,
    error_state    text     NOT NULL,
    error_message  text     NOT NULL,
    message_val    bytea    NOT NULL,
    logged_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Broker Activation counters kept by the broker's queue monitor (cumulative since reset).
CREATE TABLE ssb.activation_counters (
    singleton           boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    tasks_started       bigint NOT NULL DEFAULT 0,
    task_limit_reached  bigint NOT NULL DEFAULT 0,
    procs_invoked       bigint NOT NULL DEFAULT 0,
    tasks_aborted       bigint NOT NULL DEFAULT 0,
    receives_empty      bigint NOT NULL DEFAULT 0      -- RECEIVEs that timed out with nothing
);
INSERT INTO ssb.activation_counters DEFAULT VALUES;

-- History of activation tasks (sys.dm_broker_activated_tasks plus what ended).
CREATE TABLE ssb.activation_tasks (
    task_id      integer  PRIMARY KEY,
    reader       text     NOT NULL,
    backend_pid  integer,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at     timestamptz,
    batches      bigint   NOT NULL DEFAULT 0,
    messages     bigint   NOT NULL DEFAULT 0,
    exit_reason  text
);

-- Wait statistics sampled from pg_stat_activity by the broker (cumulative since reset), per
-- database and PostgreSQL wait event, with the SQL Server wait type it maps to.
CREATE TABLE ssb.wait_stats (
    database        text   NOT NULL,
    pg_wait_type    text   NOT NULL,
    pg_wait_event   text   NOT NULL,
    wait_type       text   NOT NULL,
    benign          boolean NOT NULL,
    waiting_tasks   bigint NOT NULL DEFAULT 0,
    wait_time_ms    float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (database, pg_wait_type, pg_wait_event, wait_type)
);

-- Diagnostic (the broker's --lock-sample-ms, off by default): sessions that waited for a lock,
-- held one another session waited for, or had a transaction open longer than a second, with
-- pg_blocking_pids() and the lock asked for (harness/targets/embedded/lock_sampler.py).
CREATE TABLE ssb.lock_samples (
    sampled_at       timestamptz NOT NULL,
    pid              integer     NOT NULL,
    app              text,
    database         text,
    backend_type     text,
    state            text,
    wait_event_type  text,
    wait_event       text,
    xact_seconds     float8,
    blocked_by       integer[]   NOT NULL,
    lock_type        text,
    lock_mode        text,
    lock_relation    text,
    query            text
);

-- The running broker process (one at a time: it also holds an advisory lock).
CREATE TABLE ssb.broker_state (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    pid           integer,
    host          text,
    initiators    integer[],
    started_at    timestamptz,
    heartbeat_at  timestamptz,
    stopped_at    timestamptz
);
INSERT INTO ssb.broker_state DEFAULT VALUES;

-- ------------------------------------------------------------------ helpers

CREATE FUNCTION ssb.now_us() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

CREATE FUNCTION ssb.message_type_name(p_type smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE p_type WHEN 1 THEN '//MySSB.com/Lab/M_Test'
                         WHEN 2 THEN 'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
                         WHEN 3 THEN 'http://schemas.microsoft.com/SQL/ServiceBroker/Error'
                         ELSE 'unknown' END $$;

CREATE FUNCTION ssb.fail(p_message text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$ BEGIN RAISE EXCEPTION '%', p_message USING ERRCODE = 'P0001'; END $$;

-- What the activation procedure does to one message body: check the 16-byte ssbench header
-- ('SSB1', send time in microseconds, flags) and return the send time. A body whose payload
-- starts with the ASCII marker POISON cannot be processed (raises): the poison message of the
-- tests. A SQL function, so it is inlined into the set-based INSERT.
CREATE FUNCTION ssb.process_message(p_body bytea) RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
        WHEN length(p_body) < 16 OR substr(p_body, 1, 4) <> '\x53534231'::bytea
            THEN ssb.fail('malformed message: no ssbench header')
        WHEN substr(p_body, 17, 6) = '\x504f49534f4e'::bytea
            THEN ssb.fail('poison message: the payload starts with POISON')
        ELSE ('x' || encode(substr(p_body, 5, 8), 'hex'))::bit(64)::bigint
    END
$$;

-- The activation procedure's own work (broker.processing_us_per_message): p_us microseconds
-- of waiting, with '/processing' appended to the session's application_name meanwhile.
CREATE FUNCTION ssb.process_work(p_us bigint) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_app text := current_setting('application_name');
BEGIN
    PERFORM set_config('application_name', left(v_app, 50) || '/processing', true);
    PERFORM pg_sleep(p_us / 1000000.0);
    PERFORM set_config('application_name', v_app, true);
END
$$;

CREATE FUNCTION ssb.is_warmup(p_body bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT length(p_body) >= 16 AND (get_byte(p_body, 15) & 1) = 1 $$;

-- Flag bit 1: the last message of its dialog (messages_per_dialog): the target ends the dialog.
CREATE FUNCTION ssb.is_last(p_body bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT length(p_body) >= 16 AND (get_byte(p_body, 15) & 2) = 2 $$;

-- ------------------------------------------------------------------ transport

-- Messages from initiator p_initiator (parallel arrays, in transmission order). Creates the
-- receive-side endpoint and conversation group of dialogs seen for the first time, accepts the
-- messages that extend each dialog's receive sequence without a gap (a duplicate or an
-- out-of-order message is not enqueued), applies EndDialog state changes, and returns the
-- receive high-water mark of every dialog in the batch: the ACK. A disabled queue accepts
-- nothing (accepted = -1): the messages stay in the initiator's transmission queue.
CREATE FUNCTION ssb.enqueue(p_initiator smallint, p_dlgids uuid[], p_seqs bigint[], p_types smallint[],
                            p_bodies bytea[],
    OUT accepted integer, OUT ack_dlgids uuid[], OUT ack_seqs bigint[])
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF NOT (SELECT is_receive_enabled FROM ssb.queues WHERE name = 'MySSBLabTestQueue') THEN
        accepted := -1; ack_dlgids := '{}'; ack_seqs := '{}';
        RETURN;
    END IF;
    -- receive-side endpoints (and their conversation groups) of new dialogs
    WITH fresh AS (
        SELECT DISTINCT u.dlg FROM unnest(p_dlgids) AS u(dlg)
         WHERE NOT EXISTS (SELECT 1 FROM ssb.sysdercv r WHERE r.diag_id = u.dlg)
    ), ins AS (
        INSERT INTO ssb.sysdercv (diag_id, initiator, handle, conv_group)
        SELECT dlg, p_initiator, gen_random_uuid(), gen_random_uuid() FROM fresh ORDER BY dlg
        ON CONFLICT DO NOTHING
        RETURNING conv_group
    )
    INSERT INTO ssb.conversation_groups (group_id) SELECT conv_group FROM ins;
    -- one transport per initiator, but lock in a fixed order anyway
    PERFORM 1 FROM ssb.sysdercv WHERE diag_id = ANY (p_dlgids) ORDER BY diag_id FOR UPDATE;
    WITH b AS (
        SELECT u.dlg, u.seq, u.typ, u.body, r.handle, r.conv_group, r.rcv_seq,
               min(u.ord) OVER (PARTITION BY u.dlg) AS first_ord,
               u.seq - row_number() OVER (PARTITION BY u.dlg ORDER BY u.seq) AS gap
          FROM unnest(p_dlgids, p_seqs, p_types, p_bodies) WITH ORDINALITY AS u(dlg, seq, typ, body, ord)
          JOIN ssb.sysdercv r ON r.diag_id = u.dlg
         WHERE u.seq > r.rcv_seq
    ), ins AS (
        INSERT INTO ssb.service_queue (conv_group, handle, diag_id, initiator, msgseqnum, msgtype, msgbody)
        SELECT conv_group, handle, dlg, p_initiator, seq, typ, body
          FROM b WHERE gap = rcv_seq
         ORDER BY first_ord, seq
        RETURNING diag_id, msgseqnum, msgtype
    ), upd AS (
        UPDATE ssb.sysdercv r
           SET rcv_seq = a.hwm,
               state = CASE WHEN NOT a.got_end THEN r.state
                            WHEN r.state = 'CO' THEN 'DI'
                            WHEN r.state = 'DO' THEN 'CD'
                            ELSE r.state END
          FROM (SELECT diag_id, max(msgseqnum) AS hwm, bool_or(msgtype = 2) AS got_end
                  FROM ins GROUP BY diag_id) a
         WHERE r.diag_id = a.diag_id
        RETURNING 1
    )
    SELECT count(*) INTO accepted FROM ins;
    SELECT coalesce(array_agg(diag_id), '{}'), coalesce(array_agg(rcv_seq), '{}')
      INTO ack_dlgids, ack_seqs
      FROM ssb.sysdercv WHERE diag_id = ANY (p_dlgids);
END
$$;

-- The way back: up to p_limit messages for initiator p_initiator, oldest first (read only).
CREATE FUNCTION ssb.transmit_batch(p_initiator smallint, p_limit integer,
    OUT n integer, OUT dlgids uuid[], OUT seqs bigint[], OUT types smallint[], OUT bodies bytea[])
LANGUAGE sql STABLE
AS $$
    SELECT count(*)::integer, array_agg(dlgid ORDER BY ord), array_agg(msgseqnum ORDER BY ord),
           array_agg(msgtype ORDER BY ord), array_agg(msgbody ORDER BY ord)
      FROM (SELECT x.*, row_number() OVER () AS ord
              FROM (SELECT * FROM ssb.sysxmitqueue WHERE to_initiator = p_initiator
                     ORDER BY enqtime LIMIT p_limit) x) y
$$;

-- The initiator acknowledged messages of the way back up to p_hwms per dialog.
CREATE FUNCTION ssb.ack_outbound(p_dlgids uuid[], p_hwms bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_n integer;
BEGIN
    DELETE FROM ssb.sysxmitqueue x
     USING unnest(p_dlgids, p_hwms) AS a(dlg, hwm)
     WHERE x.dlgid = a.dlg AND x.msgseqnum <= a.hwm;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE ssb.sysdercv d SET ack_seq = a.hwm
      FROM unnest(p_dlgids, p_hwms) AS a(dlg, hwm)
     WHERE d.diag_id = a.dlg AND d.ack_seq < a.hwm;
    RETURN v_n;
END
$$;

-- ------------------------------------------------------------------ RECEIVE

CREATE TYPE ssb.received_message AS (
    status                   smallint,
    queuing_order            bigint,
    conversation_group_id    uuid,
    conversation_handle      uuid,
    message_sequence_number  bigint,
    message_type_name        text,
    message_body             bytea,
    diag_id                  uuid,
    initiator                smallint
);

-- WAITFOR (RECEIVE TOP (p_top) ... FROM MySSBLabTestQueue), TIMEOUT p_timeout_ms.
--
-- Returns the oldest messages of ONE conversation group, in order, and keeps that group locked
-- until the caller's transaction ends (commit: the messages are gone; rollback: they are back).
-- Groups another reader holds are skipped (FOR UPDATE SKIP LOCKED), never waited for. When no
-- group has messages it polls until the timeout (pg_sleep: the wait shows as
-- Timeout/PgSleep, which ssbench maps to BROKER_RECEIVE_WAITFOR) and returns nothing.
-- Raises if the queue is disabled (STATUS = OFF), like SQL Server.
--
-- Every statement here reads ONE table (the candidate groups are passed on as arrays), so no
-- plan can be worse than linear in the queue's size whatever the statistics say. The queue's
-- statistics are often wrong: autovacuum may vacuum it while it is momentarily empty and fail
-- to truncate it (its lock is never free), leaving many pages and ~0 tuples in pg_class, so
-- the planner takes the queue for a one-row table. A join planned on that (the former
-- DELETE ... WHERE queuing_order IN (SELECT ... LIMIT p_top)) became a nested loop that ran
-- the subquery once per queued message: seconds of CPU for 10,000 messages, with the group
-- locked, so no other reader could receive it (issue 30; docs/embedded.md, "Receive stalls").
CREATE FUNCTION ssb.receive(p_top integer DEFAULT 10000, p_timeout_ms integer DEFAULT 0)
RETURNS SETOF ssb.received_message
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_group    uuid;
    v_head     uuid[];
    v_groups   uuid[];
    v_tried    uuid[] := '{}';
    v_upto     bigint;
    v_deadline timestamptz := clock_timestamp() + make_interval(secs => greatest(p_timeout_ms, 0) / 1000.0);
    v_sleep    float8 := 0.001;
    v_left     float8;
    v_n        integer;
BEGIN
    IF p_top IS NULL OR p_top < 1 THEN
        RAISE EXCEPTION 'RECEIVE TOP (%): the row count must be positive', p_top USING ERRCODE = '22023';
    END IF;
    IF NOT (SELECT is_receive_enabled FROM ssb.queues WHERE name = 'MySSBLabTestQueue') THEN
        RAISE EXCEPTION 'The service queue "MySSBLabTestQueue" is currently disabled.'
            USING ERRCODE = '55000', HINT = 'SQL Server error 9617; re-enable it with ALTER QUEUE ... WITH STATUS = ON.';
    END IF;
    LOOP
        -- 1. FIFO: the groups of the 256 oldest messages, oldest first, the first nobody holds
        SELECT array_agg(h.conv_group ORDER BY h.first) INTO v_head
          FROM (SELECT q.conv_group, min(q.queuing_order) AS first
                  FROM (SELECT q.conv_group, q.queuing_order FROM ssb.service_queue q
                         ORDER BY q.queuing_order LIMIT 256) q
                 GROUP BY q.conv_group) h;
        v_group := ssb.lock_first_group(v_head, v_tried, true);
        IF v_group IS NULL AND v_head IS NOT NULL THEN
            -- 2. the head of the queue belongs to held groups: every group with messages (one
            --    index probe per distinct group)
            WITH RECURSIVE cg(grp) AS (
                (SELECT q.conv_group FROM ssb.service_queue q ORDER BY q.conv_group LIMIT 1)
                UNION ALL
                SELECT (SELECT q.conv_group FROM ssb.service_queue q WHERE q.conv_group > cg.grp
                         ORDER BY q.conv_group LIMIT 1)
                  FROM cg WHERE cg.grp IS NOT NULL
            )
            SELECT array_agg(cg.grp) INTO v_groups FROM cg WHERE cg.grp IS NOT NULL;
            v_group := ssb.lock_first_group(v_groups, v_tried, false);
        END IF;
        IF v_group IS NOT NULL THEN
            -- the group's p_top oldest messages: up to the p_top-th one's queuing order (one
            -- transport per initiator enqueues a dialog's messages, in order, so nothing older
            -- can commit later)
            SELECT max(m.queuing_order) INTO v_upto
              FROM (SELECT s.queuing_order FROM ssb.service_queue s
                     WHERE s.conv_group = v_group ORDER BY s.queuing_order LIMIT p_top) m;
            IF v_upto IS NOT NULL THEN
                RETURN QUERY
                    WITH r AS (
                        DELETE FROM ssb.service_queue q
                         WHERE q.conv_group = v_group AND q.queuing_order <= v_upto
                        RETURNING q.*
                    )
                    SELECT 1::smallint, r.queuing_order, r.conv_group, r.handle, r.msgseqnum,
                           ssb.message_type_name(r.msgtype), r.msgbody, r.diag_id, r.initiator
                      FROM r ORDER BY r.queuing_order;
                GET DIAGNOSTICS v_n = ROW_COUNT;
                IF v_n > 0 THEN
                    RETURN;
                END IF;
            END IF;
            -- another reader emptied the group between our snapshot and our lock: look again
            v_tried := v_tried || v_group;
            v_group := NULL;
            CONTINUE;
        END IF;
        v_left := extract(epoch FROM v_deadline - clock_timestamp());
        EXIT WHEN v_left <= 0;
        PERFORM pg_sleep(least(v_sleep, v_left));
        v_sleep := least(v_sleep * 2, 0.02);
        -- groups skipped in this pass (emptied by another reader under our snapshot) may hold
        -- new messages by now: without this, a reader that lost one race on the only busy
        -- group would sit out the whole WAITFOR timeout while messages pile up
        v_tried := '{}';
    END LOOP;
    RETURN;
END
$$;

-- The first of p_groups (in their order if p_in_order, else in group order), leaving out
-- p_exclude, that no other transaction holds, locked until the caller's transaction ends (FOR
-- UPDATE SKIP LOCKED: held groups are skipped, never waited for). One table, the candidates as
-- an array: RECEIVE's locking step. (In order: p_groups is at most 256 groups long.)
CREATE FUNCTION ssb.lock_first_group(p_groups uuid[], p_exclude uuid[], p_in_order boolean) RETURNS uuid
LANGUAGE sql VOLATILE
AS $$
    SELECT g.group_id FROM ssb.conversation_groups g
     WHERE g.group_id = ANY (p_groups) AND g.group_id <> ALL (p_exclude)
     ORDER BY CASE WHEN p_in_order THEN array_position(p_groups, g.group_id) END, g.group_id
     LIMIT 1
       FOR UPDATE SKIP LOCKED
$$;

-- ------------------------------------------------------------------ END CONVERSATION

-- END CONVERSATION on the target side, with or without an error: the conversation's state moves
-- (CO -> DO, DI -> CD) and one message goes back to the initiator through the target's
-- transmission queue: an EndDialog (type 2, empty body) or an Error (type 3, the error text as
-- body). p_strict: an unknown handle raises SQL Server's error (a closed one does nothing).
CREATE FUNCTION ssb.end_conversation_as(p_handle uuid, p_type smallint, p_body bytea, p_strict boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_diag uuid;
    v_init smallint;
    v_seq  bigint;
BEGIN
    UPDATE ssb.sysdercv
       SET state = CASE state WHEN 'CO' THEN 'DO' ELSE 'CD' END, send_seq = send_seq + 1
     WHERE handle = p_handle AND state IN ('CO', 'DI')
    RETURNING diag_id, initiator, send_seq INTO v_diag, v_init, v_seq;
    IF NOT FOUND THEN
        IF p_strict THEN
            PERFORM 1 FROM ssb.sysdercv WHERE handle = p_handle;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'Cannot find the conversation handle "%".', p_handle USING ERRCODE = '42704';
            END IF;
        END IF;
        RETURN;
    END IF;
    INSERT INTO ssb.sysxmitqueue (to_initiator, dlgid, msgseqnum, msgtype, msgbody)
    VALUES (v_init, v_diag, v_seq, p_type, p_body);
END
$$;

-- END CONVERSATION on the target side: an EndDialog goes back to the initiator.
CREATE FUNCTION ssb.end_conversation(p_handle uuid) RETURNS void
LANGUAGE sql VOLATILE
AS $$ SELECT ssb.end_conversation_as(p_handle, 2::smallint, ''::bytea, true) $$;

-- END CONVERSATION ... WITH ERROR on the target side: an Error message goes back instead.
CREATE FUNCTION ssb.end_conversation_with_error(p_handle uuid, p_description text) RETURNS void
LANGUAGE sql VOLATILE
AS $$ SELECT ssb.end_conversation_as(p_handle, 3::smallint,
                                     convert_to(coalesce(p_description, ''), 'UTF8'), false) $$;

-- ------------------------------------------------------------------ the activation procedure

-- The paper's processing step, set-based: the first 2,000 bytes of every data message of a
-- RECEIVE batch into the drop table, with its initiator, dialog, sequence and send/receive
-- times; the batch positions in p_skip (poison messages already logged) are left out.
CREATE FUNCTION ssb.drop_batch(p_batch_id bigint, p_batch ssb.received_message[], p_recv_us bigint,
                               p_skip integer[]) RETURNS void
LANGUAGE sql VOLATILE
AS $$
    INSERT INTO ssb.message_drop (batch_id, pos, initiator, diag_id, msgseqnum, sent_us,
                                  received_us, warmup, message_val)
    SELECT p_batch_id, m.pos, m.initiator, m.diag_id, m.message_sequence_number,
           ssb.process_message(m.message_body), p_recv_us, ssb.is_warmup(m.message_body),
           substr(m.message_body, 1, 2000)
      FROM unnest(p_batch) WITH ORDINALITY
           AS m(status, queuing_order, conversation_group_id, conversation_handle,
                message_sequence_number, message_type_name, message_body, diag_id, initiator, pos)
     WHERE m.message_type_name = '//MySSB.com/Lab/M_Test' AND m.pos <> ALL (p_skip);
$$;

-- One pass of the paper's activation procedure (dbo.SRPerf_Queue_LabTest), in the caller's
-- transaction: WAITFOR (RECEIVE TOP (p_top) ...) into a batch, TIMEOUT p_timeout_ms; write the
-- first 2,000 bytes of every message to the drop table; END CONVERSATION on EndDialog messages;
-- record the tally. The reader task calls it in a loop, one transaction per call, and exits
-- when it returns 0 (the WAITFOR timed out with no message); -1 means the queue is disabled.
--
-- TRY/CATCH (ssb.queues.try_catch, the paper's tech tip): the batch is processed set-based in a
-- sub-block; if that fails, every message is checked on its own and the ones that cannot be
-- processed go to ssb.message_errors while the rest are written: the batch still commits.
-- Without TRY/CATCH an unprocessable message rolls the whole RECEIVE back (the reader records
-- the rollback with ssb.record_rollback(); five in a row disable the queue).
-- ssb.queues.process_delay_ms (test knob, default 0) makes every batch last at least that long.
CREATE FUNCTION ssb.activation_procedure(p_top integer DEFAULT NULL, p_timeout_ms integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    q           ssb.queues;
    v_batch     ssb.received_message[];
    v_n         integer;
    v_batch_id  bigint;
    v_recv_us   bigint;
    v_bad       integer[] := '{}';
    v_processed integer := 0;
    v_warm      integer := 0;
    v_end       integer := 0;
    v_state     text;
    v_msg       text;
    v_handle    uuid;
BEGIN
    SELECT * INTO q FROM ssb.queues WHERE name = 'MySSBLabTestQueue';
    IF NOT q.is_receive_enabled THEN
        RETURN -1;
    END IF;
    SELECT array_agg(r ORDER BY r.queuing_order) INTO v_batch
      FROM ssb.receive(coalesce(p_top, q.receive_top), coalesce(p_timeout_ms, q.waitfor_timeout_ms)) r;
    v_n := coalesce(cardinality(v_batch), 0);
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    v_recv_us := ssb.now_us();
    v_batch_id := nextval('ssb.receive_tally_id_seq');

    IF q.try_catch THEN
        BEGIN   -- TRY: the whole batch, set-based
            PERFORM ssb.drop_batch(v_batch_id, v_batch, v_recv_us, '{}');
        EXCEPTION WHEN OTHERS THEN
            -- CATCH: find the messages that cannot be processed, one by one (read-only
            -- sub-blocks: no subtransaction XIDs), log them, then write the others.
            FOR i IN 1 .. v_n LOOP
                CONTINUE WHEN v_batch[i].message_type_name <> '//MySSB.com/Lab/M_Test';
                BEGIN
                    PERFORM ssb.process_message(v_batch[i].message_body);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
                    INSERT INTO ssb.message_errors (batch_id, initiator, diag_id, msgseqnum, error_state,
                                                    error_message, message_val)
                    VALUES (v_batch_id, v_batch[i].initiator, v_batch[i].diag_id,
                            v_batch[i].message_sequence_number, v_state, v_msg,
                            substr(v_batch[i].message_body, 1, 2000));
                    v_bad := v_bad || i;
                END;
            END LOOP;
            PERFORM ssb.drop_batch(v_batch_id, v_batch, v_recv_us, v_bad);
        END;
    ELSE
        PERFORM ssb.drop_batch(v_batch_id, v_batch, v_recv_us, '{}');
    END IF;

    SELECT count(*) FILTER (WHERE m.message_type_name = '//MySSB.com/Lab/M_Test' AND m.pos <> ALL (v_bad)),
           count(*) FILTER (WHERE m.message_type_name = '//MySSB.com/Lab/M_Test' AND m.pos <> ALL (v_bad)
                              AND ssb.is_warmup(m.message_body)),
           count(*) FILTER (WHERE m.message_type_name <> '//MySSB.com/Lab/M_Test')
      INTO v_processed, v_warm, v_end
      FROM unnest(v_batch) WITH ORDINALITY
                   AS m(status, queuing_order, conversation_group_id, conversation_handle,
                        message_sequence_number, message_type_name, message_body, diag_id, initiator, pos);

    -- a message that could not be processed, on a dialog that is finishing (its last message,
    -- or the initiator already ended: DI), ends the dialog WITH ERROR so the initiator learns
    -- of it (if it still listens: fire and forget does not)
    IF cardinality(v_bad) > 0 THEN
        FOR v_handle, v_msg IN
            SELECT DISTINCT ON (m.conversation_handle) m.conversation_handle, e.error_message
              FROM unnest(v_batch) WITH ORDINALITY
                   AS m(status, queuing_order, conversation_group_id, conversation_handle,
                        message_sequence_number, message_type_name, message_body, diag_id, initiator, pos)
              JOIN ssb.sysdercv r ON r.handle = m.conversation_handle
              JOIN ssb.message_errors e ON e.batch_id = v_batch_id AND e.diag_id = m.diag_id
                                       AND e.msgseqnum = m.message_sequence_number
             WHERE m.pos = ANY (v_bad) AND (ssb.is_last(m.message_body) OR r.state = 'DI')
        LOOP
            PERFORM ssb.end_conversation_with_error(v_handle, v_msg);
        END LOOP;
    END IF;

    -- the last message of its dialog (messages_per_dialog): the target ends the conversation
    FOR v_handle IN SELECT DISTINCT m.conversation_handle
                      FROM unnest(v_batch) WITH ORDINALITY
                           AS m(status, queuing_order, conversation_group_id, conversation_handle,
                                message_sequence_number, message_type_name, message_body, diag_id, initiator, pos)
                     WHERE m.message_type_name = '//MySSB.com/Lab/M_Test' AND m.pos <> ALL (v_bad)
                       AND ssb.is_last(m.message_body)
    LOOP
        PERFORM ssb.end_conversation(v_handle);
    END LOOP;

    -- the other side ended the conversation: end ours (the EndDialog goes back)
    IF v_end > 0 THEN
        FOR v_handle IN SELECT DISTINCT m.conversation_handle FROM unnest(v_batch) AS m
                         WHERE m.message_type_name = 'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
        LOOP
            PERFORM ssb.end_conversation(v_handle);
        END LOOP;
    END IF;

    IF q.process_delay_ms > 0 THEN
        PERFORM pg_sleep(q.process_delay_ms / 1000.0);
    END IF;

    -- broker.processing_us_per_message: the procedure's own work, as a wait per measured data
    -- message (not warm-up) inside the transaction (I/O or a remote call per message). The session says so in its
    -- application_name meanwhile, so the wait sampler reports WAITFOR, not the idle RECEIVE wait.
    IF q.processing_us_per_message > 0 AND v_processed > v_warm THEN
        PERFORM ssb.process_work((v_processed - v_warm)::bigint * q.processing_us_per_message);
    END IF;

    INSERT INTO ssb.receive_tally (id, reader, backend_pid, conv_group, initiator, messages, processed,
                                   warmup, errors, end_dialogs, received_us, finished_us)
    VALUES (v_batch_id, current_setting('application_name'), pg_backend_pid(),
            v_batch[1].conversation_group_id, v_batch[1].initiator, v_n, v_processed, v_warm,
            cardinality(v_bad), v_end, v_recv_us, ssb.now_us());

    -- a RECEIVE committed: the poison-message rollback count starts again (no write when 0)
    UPDATE ssb.queues SET consecutive_rollbacks = 0
     WHERE name = 'MySSBLabTestQueue' AND consecutive_rollbacks > 0;
    RETURN v_n;
END
$$;

-- A transaction that had RECEIVEd rolled back (the reader calls this in a new transaction).
-- Five in a row disable the queue, as SQL Server's poison-message detection does. Returns
-- true when the queue is now disabled.
-- SQL Server counts a rollback as it happens, so the fifth disables the queue before any
-- other reader can RECEIVE again. Here the count comes in a second transaction, so another
-- reader can take the poison message in between and roll back too; its RECEIVE would have
-- been refused on SQL Server, so a rollback recorded after the queue is disabled is not
-- counted (five stays five with two readers). The UPDATE waits on the queue's row, then
-- re-reads is_receive_enabled.
CREATE FUNCTION ssb.record_rollback(p_error text DEFAULT NULL) RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    WITH counted AS (
        UPDATE ssb.queues
           SET consecutive_rollbacks = consecutive_rollbacks + 1,
               rollbacks_total = rollbacks_total + 1,
               last_error = coalesce(p_error, last_error),
               is_receive_enabled = consecutive_rollbacks + 1 < 5,
               disabled_at = CASE WHEN consecutive_rollbacks + 1 >= 5
                                  THEN clock_timestamp() ELSE disabled_at END
         WHERE name = 'MySSBLabTestQueue' AND is_receive_enabled
        RETURNING NOT is_receive_enabled AS disabled
    )
    SELECT coalesce((SELECT disabled FROM counted), true)
$$;

-- The whole activation procedure as one CALL (loops until the WAITFOR times out, one
-- transaction per batch): for psql and for processing the warm-up messages in-line.
-- Returns through p_messages the number of messages received.
CREATE PROCEDURE ssb.activated_task(p_top integer DEFAULT NULL, p_timeout_ms integer DEFAULT 0,
                                    INOUT p_messages bigint DEFAULT 0)
LANGUAGE plpgsql
AS $$
DECLARE
    v_n integer;
BEGIN
    p_messages := 0;
    LOOP
        v_n := ssb.activation_procedure(p_top, p_timeout_ms);
        EXIT WHEN v_n <= 0;
        p_messages := p_messages + v_n;
        COMMIT;
    END LOOP;
END
$$;

-- The receive-side conversation endpoints left behind, by state (sys.conversation_endpoints).
CREATE FUNCTION ssb.endpoint_states(OUT state text, OUT endpoints bigint)
RETURNS SETOF record
LANGUAGE sql STABLE
AS $$ SELECT state::text, count(*) FROM ssb.sysdercv GROUP BY state ORDER BY state $$;

-- ------------------------------------------------------------------ reset

-- The analogue of ALTER DATABASE ... SET NEW_BROKER: every conversation, message, tally, error,
-- counter and wait sample goes; the queue is enabled again with its rollback count at zero.
CREATE FUNCTION ssb.reset() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    TRUNCATE ssb.conversation_groups, ssb.sysdercv, ssb.service_queue, ssb.sysxmitqueue,
             ssb.message_drop, ssb.receive_tally, ssb.message_errors, ssb.activation_tasks,
             ssb.wait_stats, ssb.lock_samples
             RESTART IDENTITY;
    UPDATE ssb.queues SET is_receive_enabled = true, consecutive_rollbacks = 0, rollbacks_total = 0,
                          activation_errors = 0, last_error = NULL, disabled_at = NULL;
    UPDATE ssb.activation_counters SET tasks_started = 0, task_limit_reached = 0, procs_invoked = 0,
                                       tasks_aborted = 0, receives_empty = 0;
END
$$;
