-- Flow control's counts (docs/contract.md §10; schema.sql: flow_topics,
-- flow_groups): they follow every move of a flow topic's jobs into and out of
-- ready and reserved, whichever call makes it. A lease that ends frees its
-- group's slot (held -1 -> 0) in the same step. A group seen anew takes the
-- topic's clock as its turn (the end of the line: new groups cannot starve
-- the others); one left with no due job, no lease, no pause, no rule of its
-- own and no bucket is forgotten (flow.py forgets one with a bucket once full).
--
-- TEMP triggers, made by each connection once its store has a flow topic
-- (Store.write, flow.enable): SQLite runs a trigger's program for every row
-- written, whatever its WHEN says (about 20,000 instructions), so a store
-- that never uses flow control has none. Writes are serialized (BEGIN
-- IMMEDIATE) and a connection looks for flow topics inside each write until
-- it has the triggers, so no write to a flow topic goes uncounted.
CREATE TEMP TRIGGER IF NOT EXISTS flow_job_added AFTER INSERT ON main.jobs
WHEN NEW.state = 1 AND EXISTS (SELECT 1 FROM flow_topics WHERE topic = NEW.topic)
BEGIN
    INSERT OR IGNORE INTO flow_groups (topic, grp, turn) VALUES (NEW.topic,
        coalesce(NEW.job_group, ''), (SELECT turns FROM flow_topics WHERE topic = NEW.topic));
    UPDATE flow_groups SET ready = ready + 1
    WHERE topic = NEW.topic AND grp = coalesce(NEW.job_group, '');
END;

CREATE TEMP TRIGGER IF NOT EXISTS flow_job_removed AFTER DELETE ON main.jobs
WHEN OLD.state IN (1, 2) AND EXISTS (SELECT 1 FROM flow_topics WHERE topic = OLD.topic)
BEGIN
    UPDATE flow_groups SET
        ready = ready - (OLD.state = 1),
        leased = leased - (OLD.state = 2),
        held = CASE WHEN OLD.state = 2 AND held = -1 THEN 0 ELSE held END
    WHERE topic = OLD.topic AND grp = coalesce(OLD.job_group, '');
    UPDATE flow_topics SET leased = leased - 1 WHERE topic = OLD.topic AND OLD.state = 2;
    DELETE FROM flow_groups WHERE topic = OLD.topic AND grp = coalesce(OLD.job_group, '')
        AND ready = 0 AND leased = 0 AND paused = 0 AND rule IS NULL AND tokens IS NULL;
END;

CREATE TEMP TRIGGER IF NOT EXISTS flow_job_moved AFTER UPDATE OF state ON main.jobs
WHEN OLD.state != NEW.state AND (OLD.state IN (1, 2) OR NEW.state IN (1, 2))
    AND EXISTS (SELECT 1 FROM flow_topics WHERE topic = NEW.topic)
BEGIN
    INSERT OR IGNORE INTO flow_groups (topic, grp, turn) VALUES (NEW.topic,
        coalesce(NEW.job_group, ''), (SELECT turns FROM flow_topics WHERE topic = NEW.topic));
    UPDATE flow_groups SET
        ready = ready + (NEW.state = 1) - (OLD.state = 1),
        leased = leased + (NEW.state = 2) - (OLD.state = 2),
        held = CASE WHEN OLD.state = 2 AND held = -1 THEN 0 ELSE held END
    WHERE topic = NEW.topic AND grp = coalesce(NEW.job_group, '');
    UPDATE flow_topics SET leased = leased + (NEW.state = 2) - (OLD.state = 2)
    WHERE topic = NEW.topic AND (NEW.state = 2 OR OLD.state = 2);
    DELETE FROM flow_groups WHERE topic = NEW.topic AND grp = coalesce(NEW.job_group, '')
        AND ready = 0 AND leased = 0 AND paused = 0 AND rule IS NULL AND tokens IS NULL;
END;
