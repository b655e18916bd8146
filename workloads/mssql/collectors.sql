-- ssbench: DMV collectors for the SQL Server target. All need VIEW SERVER STATE except the
-- catalog-view queries. Benign waits are filtered in Python (harness/targets/mssql/telemetry.py,
-- BENIGN_WAITS), so the list lives in one place. Placeholders: see server.sql.

-- @@ wait_stats
-- Cumulative since the instance started or since DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR).
-- wait_time_ms includes signal_wait_time_ms (the time runnable, waiting for a CPU after the
-- resource came free): both are read, so the resource wait and the CPU queue are told apart.
SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms
FROM sys.dm_os_wait_stats
WHERE waiting_tasks_count > 0 OR wait_time_ms > 0;

-- @@ perf_counters
-- object_name carries the instance prefix ('SQLServer:Broker Statistics',
-- 'MSSQL$INST:Broker Activation'); Python matches on the part after the colon and classifies
-- each counter by its name (telemetry.py counter_kind): cntr_type 65792 is "the last observed
-- value" for a current value and for a running total ("SQL SEND Total") alike.
SELECT RTRIM(object_name), RTRIM(counter_name), RTRIM(instance_name), cntr_value, cntr_type
FROM sys.dm_os_performance_counters
WHERE object_name LIKE N'%:Broker%';

-- @@ activated_tasks
-- Receive tasks Service Broker activated for a queue of the current database.
SELECT COUNT(*)
FROM sys.dm_broker_activated_tasks AS t
JOIN sys.service_queues AS q ON q.object_id = t.queue_id
WHERE t.database_id = DB_ID() AND q.name = ? AND q.schema_id = SCHEMA_ID(N'dbo');

-- @@ queue_state
SELECT q.is_receive_enabled, q.is_enqueue_enabled, q.is_activation_enabled, q.max_readers,
       q.activation_procedure
FROM sys.service_queues AS q
WHERE q.name = ? AND q.schema_id = SCHEMA_ID(N'dbo');

-- @@ xmitq_fast
-- The paper's transmission-queue depth: the row count of sys.sysxmitqueue's partition. The
-- second column is 0 when the system table is not visible to this login (then ssbench counts
-- sys.transmission_queue instead).
SELECT ISNULL(SUM(p.rows), 0), COUNT(DISTINCT o.object_id)
FROM sys.objects AS o
LEFT JOIN sys.partitions AS p ON p.object_id = o.object_id AND p.index_id IN (0, 1)
WHERE o.name = N'sysxmitqueue';

-- @@ xmitq_exact
SELECT COUNT_BIG(*) FROM sys.transmission_queue;

-- @@ queue_fast
-- A queue's depth from the row count of its internal table (QUEUE_MESSAGES).
SELECT ISNULL(SUM(p.rows), 0)
FROM sys.service_queues AS q
JOIN sys.internal_tables AS it ON it.parent_id = q.object_id AND it.internal_type_desc = N'QUEUE_MESSAGES'
JOIN sys.partitions AS p ON p.object_id = it.object_id AND p.index_id IN (0, 1)
WHERE q.name = ? AND q.schema_id = SCHEMA_ID(N'dbo');

-- @@ server_cpu
-- SQL Server's CPU so far: every resource pool's total_cpu_usage_ms (the internal and default
-- pools included; cumulative since the Resource Governor statistics were reset), and the
-- schedulers it runs on. Sampled every tick, the difference covers exactly the window (the
-- scheduler-monitor ring buffer has one record a minute).
SELECT (SELECT SUM(total_cpu_usage_ms) FROM sys.dm_resource_governor_resource_pools),
       (SELECT COUNT(*) FROM sys.dm_os_schedulers WHERE status = N'VISIBLE ONLINE');

-- @@ log_sizes
-- Every database's log size in MB (sys.master_files, size in 8-KB pages), each tick: a log that
-- grew inside the measured window autogrew under the load.
SELECT DB_NAME(database_id), SUM(CAST(size AS bigint)) * 8 / 1024.0
FROM sys.master_files
WHERE type = 1
GROUP BY database_id;

-- @@ backups_between
-- Backups of a database that overlapped a window given in UTC (msdb.dbo.backupset: a row per
-- finished backup, its dates in the server's local time; time_zone is the offset from UTC in
-- 15-minute steps, 127 when unknown: then the server's current offset).
SELECT b.type, b.backup_start_date, b.backup_finish_date
FROM msdb.dbo.backupset AS b
CROSS APPLY (SELECT IIF(b.time_zone = 127 OR b.time_zone IS NULL,
                        DATEDIFF(minute, SYSUTCDATETIME(), SYSDATETIME()),
                        15 * b.time_zone) AS offset_min) AS z
WHERE b.database_name = ?
  AND DATEADD(minute, -z.offset_min, b.backup_start_date) < ?
  AND DATEADD(minute, -z.offset_min, b.backup_finish_date) >= ?;

-- @@ endpoint_states
-- The conversation endpoints of the test's service by state (sys.conversation_endpoints), and
-- how many this database began. Once both sides have ended a dialog its initiator endpoint
-- is deleted; only the target's CLOSED endpoint lingers (about 30 minutes), so these are the
-- endpoints left behind, not a count of dialogs (ssbench_counts counts those).
SELECT ce.state, COUNT_BIG(*), SUM(CAST(ce.is_initiator AS bigint))
FROM sys.conversation_endpoints AS ce
JOIN sys.services AS s ON s.service_id = ce.service_id
WHERE s.name = ?
GROUP BY ce.state;

-- @@ broker_waits
-- Service Broker's own waits, idle ones included (BROKER_RECEIVE_WAITFOR: readers waiting in
-- their RECEIVE; BROKER_TASK_STOP: activation tasks ending; BROKER_TRANSMITTER ...), which the
-- wait profile leaves out, for the diagnosis (docs/diagnosis.md).
SELECT wait_type, waiting_tasks_count, wait_time_ms
FROM sys.dm_os_wait_stats
WHERE wait_type LIKE N'BROKER[_]%' AND (waiting_tasks_count > 0 OR wait_time_ms > 0);

-- @@ broker_latches
-- Service Broker's latch classes (SERVICE_BROKER_WAITFOR_MANAGER: readers waiting in WAITFOR
-- queue on it when there are more of them than the work needs).
SELECT latch_class, waiting_requests_count, wait_time_ms
FROM sys.dm_os_latch_stats
WHERE latch_class LIKE N'SERVICE[_]BROKER%' AND (waiting_requests_count > 0 OR wait_time_ms > 0);

-- @@ session_waits
-- Requests waiting now, by role: the activated RECEIVE tasks (sys.dm_broker_activated_tasks)
-- and the load's sessions (program_name: the sender connections' APP=), by wait type; a
-- request that is runnable (its resource came free, it waits for a CPU: signal wait) counts
-- as RUNNABLE.
SELECT CASE WHEN t.spid IS NOT NULL THEN N'reader' ELSE N'sender' END,
       ISNULL(r.wait_type, N'RUNNABLE'), COUNT(*)
FROM sys.dm_exec_requests AS r
JOIN sys.dm_exec_sessions AS s ON s.session_id = r.session_id
LEFT JOIN (SELECT DISTINCT spid FROM sys.dm_broker_activated_tasks) AS t ON t.spid = r.session_id
WHERE (r.wait_type IS NOT NULL OR r.status = N'runnable') AND r.session_id <> @@SPID
  AND (t.spid IS NOT NULL OR s.program_name = ?)
GROUP BY CASE WHEN t.spid IS NOT NULL THEN N'reader' ELSE N'sender' END, ISNULL(r.wait_type, N'RUNNABLE');

-- @@ page_latch_waiters
-- Tasks waiting on a page latch now, by page: resource_description is
-- 'database_id:file_id:page_id' (the paper's hot sys.sysdesend pages show up here).
SELECT wait_type, resource_description, COUNT(*)
FROM sys.dm_os_waiting_tasks
WHERE wait_type LIKE N'PAGELATCH[_]%' AND resource_description IS NOT NULL
GROUP BY wait_type, resource_description;

-- @@ page_info
-- The object a page belongs to: sys.dm_db_page_info (SQL Server 2019 and later; the caller
-- keeps the raw page id on older servers).
SELECT DB_NAME(pi.database_id), OBJECT_SCHEMA_NAME(pi.object_id, pi.database_id),
       OBJECT_NAME(pi.object_id, pi.database_id), pi.index_id, pi.page_type_desc
FROM sys.dm_db_page_info(?, ?, ?, 'LIMITED') AS pi;

