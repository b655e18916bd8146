-- ssbench embedded target: the INITIATOR side of the PostgreSQL emulation of Service Broker.
--
-- Loaded by harness/targets/embedded/target.py into every initiator database (ssb_init1 ...).
-- The whole file is (re)applied when its content changes: target.py drops schema ssb and runs
-- this file again (everything here is reset between permutations anyway).
--
-- This is PostgreSQL, not SQL Server. Names follow the SQL Server system tables they stand in
-- for (sys.sysdesend, sys.sysxmitqueue) so the paper's analysis maps onto them; see
-- docs/embedded.md for what is reproduced and what is not.
--
-- Protocol with the broker process (harness/targets/embedded/broker.py):
--   ssb.transmit_batch(n)            committed messages, oldest first (read only)
--   -> target: ssb.enqueue(...)      the target commits them (dedup by dialog + sequence)
--   ssb.ack(dialogs, high-water)     removes what the target acknowledged: the ACK
--   target: ssb.transmit_batch(i, n) -> ssb.accept_replies(...) -> target: ssb.ack_outbound(...)
--                                    the way back (EndDialog messages)

CREATE SCHEMA ssb;
COMMENT ON SCHEMA ssb IS 'ssbench: PostgreSQL emulation of Service Broker (initiator side)';

-- ------------------------------------------------------------------ tables

-- One row: this database's identity and the messages SENDs must not count.
CREATE TABLE ssb.config (
    singleton    boolean  PRIMARY KEY DEFAULT true CHECK (singleton),
    initiator    smallint NOT NULL DEFAULT 0,   -- this initiator's number (1..n), set by provision()
    warmup_sent  bigint   NOT NULL DEFAULT 0,   -- warm-up messages sent since the last reset
    system_sent  bigint   NOT NULL DEFAULT 0,   -- EndDialog messages sent since the last reset
    -- dialog lifetime (messages_per_dialog, fire_and_forget; docs/matrices.md), since the last reset:
    dialogs_begun    bigint NOT NULL DEFAULT 0, -- BEGIN DIALOGs of the SEND path (ssb.send_retiring)
    dialogs_ended    bigint NOT NULL DEFAULT 0, -- END CONVERSATIONs of retired dialogs by this side
    errors_received  bigint NOT NULL DEFAULT 0, -- Error messages that reached a listening endpoint
    errors_lost      bigint NOT NULL DEFAULT 0  -- Error messages for an endpoint this side had ended:
                                                -- nobody RECEIVEs them (fire and forget)
);
INSERT INTO ssb.config DEFAULT VALUES;

-- sys.sysdesend: one row per dialog begun here; every SEND updates its row (send_seq). That
-- hot-row update is the contention the paper's "150 trick" spreads over pages. fillfactor 90
-- leaves room on each page so the update stays a HOT update on the same page (otherwise the
-- first update of a full page would move the row to the table's tail, next to the other hot
-- rows, and undo the trick's physical spreading).
CREATE TABLE ssb.sysdesend (
    handle    uuid    NOT NULL,                -- this side's conversation handle
    diag_id   uuid    NOT NULL,                -- the conversation id (same on both sides)
    send_seq  bigint  NOT NULL DEFAULT 0,      -- sequence number of the last message sent
    ack_seq   bigint  NOT NULL DEFAULT 0,      -- acknowledged by the target (informational, may lag)
    rcv_seq   bigint  NOT NULL DEFAULT 0,      -- highest sequence number received from the target
    state     char(2) NOT NULL DEFAULT 'CO',   -- CO conversing, DI/DO disconnected in/out, ER error, CD closed
    retired   boolean NOT NULL DEFAULT false,  -- its last message was sent (messages_per_dialog)
    CONSTRAINT sysdesend_pkey PRIMARY KEY (handle),
    CONSTRAINT sysdesend_diag_id_key UNIQUE (diag_id)
) WITH (fillfactor = 90);

-- sys.sysxmitqueue: messages sent and committed here, not yet acknowledged by the target.
-- Keyed like SQL Server's (dialog, sequence); enqtime orders the transport (FIFO).
CREATE TABLE ssb.sysxmitqueue (
    dlgid      uuid        NOT NULL,
    msgseqnum  bigint      NOT NULL,
    msgtype    smallint    NOT NULL,           -- 1 = //MySSB.com/Lab/M_Test, 2 = EndDialog, 3 = Error
    enqtime    timestamptz NOT NULL,
    msgbody    bytea       NOT NULL,
    CONSTRAINT sysxmitqueue_pkey PRIMARY KEY (dlgid, msgseqnum)
);
CREATE INDEX sysxmitqueue_enqtime ON ssb.sysxmitqueue (enqtime);

-- The paper's dbo.dialogs: the usable dialogs (every N-th one begun), slot k -> handle.
CREATE TABLE ssb.dialogs (
    k       integer NOT NULL PRIMARY KEY,
    handle  uuid    NOT NULL
);

-- The initiator service's own queue: messages coming back from the target (EndDialog).
CREATE TABLE ssb.initiator_queue (
    queuing_order  bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handle         uuid     NOT NULL,
    diag_id        uuid     NOT NULL,
    msgseqnum      bigint   NOT NULL,
    msgtype        smallint NOT NULL,
    msgbody        bytea    NOT NULL
);

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

-- The 16-byte header ssbench puts in front of every message body:
--   bytes 1-4   'SSB1'
--   bytes 5-12  send time, microseconds since the Unix epoch, big-endian int8 (clock_timestamp())
--   bytes 13-16 flags, big-endian int4 (bit 0: warm-up message; bit 1: the last message of its
--               dialog, which the target answers by ending the conversation)
-- The target's activation procedure reads the send time back to compute end-to-end latency on
-- one clock (both sides run on the same server).
CREATE FUNCTION ssb.message_header(p_time_us bigint, p_flags integer) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '\x53534231'::bytea || int8send(p_time_us) || int4send(p_flags) $$;

-- ------------------------------------------------------------------ BEGIN DIALOG

-- BEGIN DIALOG CONVERSATION: one new conversation endpoint, its handle returned.
CREATE FUNCTION ssb.begin_dialog() RETURNS uuid
LANGUAGE sql VOLATILE
AS $$
    INSERT INTO ssb.sysdesend (handle, diag_id) VALUES (gen_random_uuid(), gen_random_uuid())
    RETURNING handle
$$;

-- BEGIN DIALOG p_count times, set-based, keeping every p_every_n-th handle in ssb.dialogs as the
-- next usable slots (the paper's 150 trick: p_every_n = 150). Rows are inserted in creation
-- order, so consecutive dialogs share heap pages and the kept ones are p_every_n rows apart.
-- Returns the number of dialogs begun.
CREATE FUNCTION ssb.begin_dialogs(p_count integer, p_every_n integer DEFAULT 1) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_base integer;
BEGIN
    IF p_count IS NULL OR p_count < 0 THEN
        RAISE EXCEPTION 'begin_dialogs: count must be >= 0, got %', p_count USING ERRCODE = '22023';
    END IF;
    IF p_every_n IS NULL OR p_every_n < 1 THEN
        RAISE EXCEPTION 'begin_dialogs: every_n must be >= 1, got %', p_every_n USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(max(k), 0) INTO v_base FROM ssb.dialogs;
    WITH created AS (
        INSERT INTO ssb.sysdesend (handle, diag_id)
        SELECT gen_random_uuid(), gen_random_uuid() FROM generate_series(1, p_count) AS i ORDER BY i
        RETURNING handle
    ), numbered AS (
        SELECT handle, row_number() OVER () AS i FROM created
    )
    INSERT INTO ssb.dialogs (k, handle)
    SELECT v_base + (i / p_every_n)::integer, handle FROM numbered WHERE i % p_every_n = 0;
    RETURN p_count;
END
$$;

-- ------------------------------------------------------------------ SEND

-- SEND ON CONVERSATION p_handle: one message, in the caller's transaction (one statement, so
-- `SELECT ssb.send($1, $2)` in autocommit is one transaction per SEND, as in the paper).
-- Updates the endpoint's send sequence (the sys.sysdesend hot row) and queues the message with
-- the send time stamped in its header. Returns the message's sequence number.
--
-- Test knob: the per-database setting ssbench.send_delay_ms (default unset = 0) makes every
-- SEND sleep that long first; the regression-gate tests use it to make SEND slower on purpose.
CREATE FUNCTION ssb.send(p_handle uuid, p_body bytea) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_diag   uuid;
    v_seq    bigint;
    v_now    timestamptz;
    v_delay  text := current_setting('ssbench.send_delay_ms', true);
    v_state  text;
BEGIN
    IF v_delay IS NOT NULL AND v_delay NOT IN ('', '0') THEN
        PERFORM pg_sleep(v_delay::numeric / 1000);
    END IF;
    UPDATE ssb.sysdesend SET send_seq = send_seq + 1
     WHERE handle = p_handle AND state = 'CO'
    RETURNING diag_id, send_seq INTO v_diag, v_seq;
    IF NOT FOUND THEN
        SELECT state INTO v_state FROM ssb.sysdesend WHERE handle = p_handle;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'Cannot find the remote service or conversation handle "%" (no such conversation).', p_handle
                USING ERRCODE = '42704', HINT = 'SQL Server error 8426: begin the dialog first (ssb.begin_dialog).';
        END IF;
        RAISE EXCEPTION 'The conversation endpoint is not in a valid state for SEND. The current endpoint state is ''%''.', v_state
            USING ERRCODE = '55000', HINT = 'SQL Server error 8429: the conversation was ended.';
    END IF;
    v_now := clock_timestamp();
    INSERT INTO ssb.sysxmitqueue (dlgid, msgseqnum, msgtype, enqtime, msgbody)
    VALUES (v_diag, v_seq, 1, v_now,
            ssb.message_header((extract(epoch FROM v_now) * 1000000)::bigint, 0) || coalesce(p_body, ''::bytea));
    RETURN v_seq;
END
$$;

-- SEND with a dialog lifetime (the messages_per_dialog axis): one round trip that
--   * begins a dialog first when p_handle is NULL (BEGIN DIALOG; counted in dialogs_begun),
--   * SENDs one message on it (flag bit 1 when p_last: the dialog's last message),
--   * when p_last: retires the dialog, and with p_fire_and_forget ENDs it at once (the
--     initiator ends first: CO -> DO; counted in dialogs_ended); without, the target ends it on
--     the last message and the initiator ends its side when that EndDialog arrives
--     (ssb.accept_replies), the pattern the seeds recommend.
-- Returns the handle to send on next: the dialog's, or NULL once it is retired (the next call
-- begins a new one). messages_per_dialog = 1 is BEGIN DIALOG + SEND (+ END) per message.
-- ssb.send stays the statement of the unlimited (reuse) case: its hot path is unchanged.
CREATE FUNCTION ssb.send_retiring(p_handle uuid, p_body bytea, p_last boolean, p_fire_and_forget boolean)
RETURNS uuid
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_handle uuid := p_handle;
    v_diag   uuid;
    v_seq    bigint;
    v_now    timestamptz;
    v_state  text;
BEGIN
    IF v_handle IS NULL THEN
        INSERT INTO ssb.sysdesend (handle, diag_id) VALUES (gen_random_uuid(), gen_random_uuid())
        RETURNING handle INTO v_handle;
        UPDATE ssb.config SET dialogs_begun = dialogs_begun + 1;
    END IF;
    UPDATE ssb.sysdesend SET send_seq = send_seq + 1, retired = p_last
     WHERE handle = v_handle AND state = 'CO'
    RETURNING diag_id, send_seq INTO v_diag, v_seq;
    IF NOT FOUND THEN
        SELECT state INTO v_state FROM ssb.sysdesend WHERE handle = v_handle;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'Cannot find the remote service or conversation handle "%" (no such conversation).', v_handle
                USING ERRCODE = '42704';
        END IF;
        RAISE EXCEPTION 'The conversation endpoint is not in a valid state for SEND. The current endpoint state is ''%''.', v_state
            USING ERRCODE = '55000';
    END IF;
    v_now := clock_timestamp();
    INSERT INTO ssb.sysxmitqueue (dlgid, msgseqnum, msgtype, enqtime, msgbody)
    VALUES (v_diag, v_seq, 1, v_now,
            ssb.message_header((extract(epoch FROM v_now) * 1000000)::bigint,
                               CASE WHEN p_last AND NOT p_fire_and_forget THEN 2 ELSE 0 END)
            || coalesce(p_body, ''::bytea));
    IF NOT p_last THEN
        RETURN v_handle;
    END IF;
    IF p_fire_and_forget THEN
        PERFORM ssb.end_conversation(v_handle);
        UPDATE ssb.config SET dialogs_ended = dialogs_ended + 1;
    END IF;
    RETURN NULL;
END
$$;

-- The paper's warm-up: one short message on every open conversation, set-based in one
-- transaction. Warm-up messages carry flag bit 0 and are excluded from the harness's counts.
-- Returns the number of messages sent.
CREATE FUNCTION ssb.warm_up(p_body bytea DEFAULT convert_to(repeat('x', 50), 'UTF8')) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_n integer;
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH s AS (
        UPDATE ssb.sysdesend SET send_seq = send_seq + 1 WHERE state = 'CO'
        RETURNING diag_id, send_seq
    )
    INSERT INTO ssb.sysxmitqueue (dlgid, msgseqnum, msgtype, enqtime, msgbody)
    SELECT diag_id, send_seq, 1, v_now,
           ssb.message_header((extract(epoch FROM v_now) * 1000000)::bigint, 1) || p_body
      FROM s;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE ssb.config SET warmup_sent = warmup_sent + v_n;
    RETURN v_n;
END
$$;

-- ------------------------------------------------------------------ END CONVERSATION, RECEIVE

-- END CONVERSATION on the initiator side. CO -> DO (an EndDialog message goes to the target);
-- DI (the target ended first) -> CD (an EndDialog goes back as the acknowledgement).
-- ER (an Error arrived) -> CD, with an EndDialog back. Ending an already closed or
-- disconnected-outbound conversation does nothing.
CREATE FUNCTION ssb.end_conversation(p_handle uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_diag uuid;
    v_seq  bigint;
    v_now  timestamptz := clock_timestamp();
BEGIN
    UPDATE ssb.sysdesend
       SET state = CASE state WHEN 'CO' THEN 'DO' ELSE 'CD' END, send_seq = send_seq + 1
     WHERE handle = p_handle AND state IN ('CO', 'DI', 'ER')
    RETURNING diag_id, send_seq INTO v_diag, v_seq;
    IF NOT FOUND THEN
        PERFORM 1 FROM ssb.sysdesend WHERE handle = p_handle;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'Cannot find the conversation handle "%".', p_handle USING ERRCODE = '42704';
        END IF;
        RETURN;
    END IF;
    INSERT INTO ssb.sysxmitqueue (dlgid, msgseqnum, msgtype, enqtime, msgbody)
    VALUES (v_diag, v_seq, 2, v_now, ''::bytea);
    UPDATE ssb.config SET system_sent = system_sent + 1;
END
$$;

-- RECEIVE TOP (p_top) from the initiator service's queue (EndDialog messages from the target),
-- oldest first. The harness never needs more than this on the initiator side.
CREATE FUNCTION ssb.receive(p_top integer DEFAULT 1)
RETURNS TABLE (queuing_order bigint, conversation_handle uuid, message_sequence_number bigint,
               message_type_name text, message_body bytea)
LANGUAGE sql VOLATILE
AS $$
    WITH r AS (
        DELETE FROM ssb.initiator_queue q
         WHERE q.queuing_order IN (SELECT queuing_order FROM ssb.initiator_queue
                                   ORDER BY queuing_order LIMIT p_top FOR UPDATE SKIP LOCKED)
        RETURNING q.*
    )
    SELECT r.queuing_order, r.handle, r.msgseqnum, ssb.message_type_name(r.msgtype), r.msgbody
      FROM r ORDER BY r.queuing_order
$$;

-- ------------------------------------------------------------------ transport (broker process)

-- Up to p_limit committed messages, oldest first, as parallel arrays (read only: a message
-- leaves the transmission queue only when ssb.ack() sees the target's acknowledgement).
CREATE FUNCTION ssb.transmit_batch(p_limit integer,
    OUT n integer, OUT dlgids uuid[], OUT seqs bigint[], OUT types smallint[], OUT bodies bytea[])
LANGUAGE sql STABLE
AS $$
    SELECT count(*)::integer, array_agg(dlgid ORDER BY ord), array_agg(msgseqnum ORDER BY ord),
           array_agg(msgtype ORDER BY ord), array_agg(msgbody ORDER BY ord)
      FROM (SELECT x.*, row_number() OVER () AS ord
              FROM (SELECT * FROM ssb.sysxmitqueue ORDER BY enqtime LIMIT p_limit) x) y
$$;

-- The ACK: the target holds every message of dialog p_dlgids[i] up to sequence p_hwms[i].
-- Removes them from the transmission queue and records the acknowledged sequence on the
-- endpoint (the second initiator-side transaction per message the paper describes).
-- Returns the number of messages removed.
-- Two choices keep the ACK from convoying with SENDs on the hot sysdesend rows:
--  * it commits without waiting for its WAL flush: an ACK lost in a crash only means the
--    messages are transmitted again and the target drops them as duplicates (and since every
--    database shares one WAL stream, a durable ACK implies the target's earlier commit is too);
--  * it skips endpoint rows a SEND holds at that moment (SKIP LOCKED) instead of queueing
--    behind it while holding the rows it already updated; ack_seq is informational and catches
--    up with the dialog's next ACK.
CREATE FUNCTION ssb.ack(p_dlgids uuid[], p_hwms bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_n integer;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    DELETE FROM ssb.sysxmitqueue x
     USING unnest(p_dlgids, p_hwms) AS a(dlg, hwm)
     WHERE x.dlgid = a.dlg AND x.msgseqnum <= a.hwm;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    WITH free AS (
        SELECT d.diag_id FROM ssb.sysdesend d
         WHERE d.diag_id = ANY (p_dlgids)
         ORDER BY d.diag_id
           FOR NO KEY UPDATE SKIP LOCKED
    )
    UPDATE ssb.sysdesend d SET ack_seq = a.hwm
      FROM unnest(p_dlgids, p_hwms) AS a(dlg, hwm) JOIN free f ON f.diag_id = a.dlg
     WHERE d.diag_id = a.dlg AND d.ack_seq < a.hwm;
    RETURN v_n;
END
$$;

-- Messages from the target (the way back): accept those that extend each dialog's receive
-- sequence without a gap, drop duplicates, apply EndDialog and Error state changes (EndDialog:
-- CO -> DI, DO -> CD; Error: CO/DI -> ER, DO -> CD), and return the receive high-water mark of
-- every dialog in the batch (the ACK to send back).
-- A retired dialog (ssb.send_retiring) is ended here when the target's EndDialog or Error
-- arrives: the emulation of the initiator's activated procedure that RECEIVEs it and ENDs its
-- side (those messages do not stay in ssb.initiator_queue). An Error for an endpoint this side
-- had already ended (DO: fire and forget) reaches nobody: it is counted in errors_lost; one that
-- reaches a listening endpoint in errors_received.
CREATE FUNCTION ssb.accept_replies(p_dlgids uuid[], p_seqs bigint[], p_types smallint[], p_bodies bytea[],
    OUT accepted integer, OUT ack_dlgids uuid[], OUT ack_seqs bigint[])
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_lost     integer;
    v_received integer;
    v_handle   uuid;
    v_ended    integer := 0;
    v_ends     uuid[];
    v_lost_on  uuid[];
BEGIN
    PERFORM 1 FROM ssb.sysdesend WHERE diag_id = ANY (p_dlgids) ORDER BY diag_id FOR UPDATE;
    WITH b AS (
        SELECT u.dlg, u.seq, u.typ, u.body, u.ord, d.handle, d.rcv_seq,
               u.seq - row_number() OVER (PARTITION BY u.dlg ORDER BY u.seq) AS gap
          FROM unnest(p_dlgids, p_seqs, p_types, p_bodies) WITH ORDINALITY AS u(dlg, seq, typ, body, ord)
          JOIN ssb.sysdesend d ON d.diag_id = u.dlg
         WHERE u.seq > d.rcv_seq
    ), ins AS (
        INSERT INTO ssb.initiator_queue (handle, diag_id, msgseqnum, msgtype, msgbody)
        SELECT handle, dlg, seq, typ, body FROM b WHERE gap = rcv_seq ORDER BY ord
        RETURNING diag_id, msgseqnum, msgtype
    ), a AS (
        SELECT diag_id, max(msgseqnum) AS hwm, bool_or(msgtype = 2) AS got_end, bool_or(msgtype = 3) AS got_error
          FROM ins GROUP BY diag_id
    ), old AS (            -- the endpoints' states before this batch (one snapshot for the WITH)
        SELECT d.diag_id, d.state FROM ssb.sysdesend d JOIN a ON a.diag_id = d.diag_id
    ), upd AS (
        UPDATE ssb.sysdesend d
           SET rcv_seq = a.hwm,
               state = CASE WHEN NOT (a.got_end OR a.got_error) THEN d.state
                            WHEN d.state = 'DO' THEN 'CD'
                            WHEN a.got_error AND d.state IN ('CO', 'DI') THEN 'ER'
                            WHEN d.state = 'CO' THEN 'DI'
                            ELSE d.state END
          FROM a
         WHERE d.diag_id = a.diag_id
        RETURNING 1
    ), sys AS (
        SELECT ins.diag_id, ins.msgtype, old.state AS prior FROM ins JOIN old ON old.diag_id = ins.diag_id
         WHERE ins.msgtype IN (2, 3)
    )
    SELECT (SELECT count(*) FROM ins),
           (SELECT count(*) FROM sys WHERE msgtype = 3 AND prior = 'DO'),
           (SELECT count(*) FROM sys WHERE msgtype = 3 AND prior <> 'DO'),
           (SELECT array_agg(DISTINCT diag_id) FROM sys),
           (SELECT array_agg(DISTINCT diag_id) FROM sys WHERE msgtype = 3 AND prior = 'DO')
      INTO accepted, v_lost, v_received, v_ends, v_lost_on;
    IF v_ends IS NOT NULL THEN
        -- the initiator's activated procedure: RECEIVE the EndDialog / Error of retired dialogs, END
        FOR v_handle IN SELECT d.handle FROM ssb.sysdesend d
                         WHERE d.diag_id = ANY (v_ends) AND d.retired AND d.state IN ('DI', 'ER')
                         ORDER BY d.diag_id
        LOOP
            PERFORM ssb.end_conversation(v_handle);
            v_ended := v_ended + 1;
        END LOOP;
        DELETE FROM ssb.initiator_queue q USING ssb.sysdesend d
         WHERE q.diag_id = ANY (v_ends) AND q.diag_id = d.diag_id AND d.retired AND q.msgtype IN (2, 3);
        -- an Error for an endpoint already ended is discarded, not queued: nobody would RECEIVE it
        DELETE FROM ssb.initiator_queue q WHERE q.diag_id = ANY (coalesce(v_lost_on, '{}')) AND q.msgtype = 3;
    END IF;
    IF v_lost + v_received + v_ended > 0 THEN
        UPDATE ssb.config SET errors_lost = errors_lost + v_lost, errors_received = errors_received + v_received,
                              dialogs_ended = dialogs_ended + v_ended;
    END IF;
    SELECT coalesce(array_agg(diag_id), '{}'), coalesce(array_agg(rcv_seq), '{}')
      INTO ack_dlgids, ack_seqs
      FROM ssb.sysdesend WHERE diag_id = ANY (p_dlgids);
END
$$;

-- Dialog lifetime accounting since the last reset: dialogs begun and ended by this side,
-- Error messages received and lost, and the conversation endpoints left behind by state
-- (the emulation's sys.conversation_endpoints: closed endpoints linger, as on SQL Server).
CREATE FUNCTION ssb.dialog_stats(OUT dialogs_begun bigint, OUT dialogs_ended bigint,
    OUT errors_received bigint, OUT errors_lost bigint, OUT states text[], OUT endpoints bigint[])
LANGUAGE sql STABLE
AS $$
    SELECT c.dialogs_begun, c.dialogs_ended, c.errors_received, c.errors_lost,
           coalesce((SELECT array_agg(state ORDER BY state) FROM (SELECT state, count(*) n FROM ssb.sysdesend GROUP BY state) s), '{}'),
           coalesce((SELECT array_agg(n ORDER BY state) FROM (SELECT state, count(*) n FROM ssb.sysdesend GROUP BY state) s), '{}')
      FROM ssb.config c
$$;

-- ------------------------------------------------------------------ accounting and reset

-- SENDs committed since the last reset, warm-up and EndDialog messages excluded. Derived from
-- the endpoints' send sequences: SEND itself does no extra write for the accounting.
CREATE FUNCTION ssb.sent_count() RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT sum(send_seq) FROM ssb.sysdesend), 0)::bigint
           - (SELECT warmup_sent + system_sent FROM ssb.config)
$$;

-- The analogue of ALTER DATABASE ... SET NEW_BROKER: every conversation and message goes.
CREATE FUNCTION ssb.reset() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    TRUNCATE ssb.sysdesend, ssb.sysxmitqueue, ssb.dialogs, ssb.initiator_queue RESTART IDENTITY;
    UPDATE ssb.config SET warmup_sent = 0, system_sent = 0, dialogs_begun = 0, dialogs_ended = 0,
                          errors_received = 0, errors_lost = 0;
END
$$;
