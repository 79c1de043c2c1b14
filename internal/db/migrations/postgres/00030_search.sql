-- Full-text search over tasks, comments and retained email (docs/api.md,
-- "Search"): a tsvector column on each searched table with a GIN index.
-- The text is split on every non-alphanumeric character before
-- to_tsvector('simple', …), so words match as SQLite's unicode61
-- tokenizer splits them (an address "jane@example.com" is the words
-- jane, example, com on both databases). Weights say which part matched:
-- A a title or subject, B a body or attachment file name, C an email's
-- sender, D its recipients (the from: and to: filters ask for C and D).
-- Tasks and comments compute the column (generated, so it changes in the
-- row's own statement); an email's needs its attachments' file names,
-- which only a trigger can read (the attachments are stored before the
-- message, in the same transaction).

-- +goose Up
ALTER TABLE issues ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', regexp_replace(title, '[^[:alnum:]]+', ' ', 'g')), 'A') ||
    setweight(to_tsvector('simple', regexp_replace(description, '[^[:alnum:]]+', ' ', 'g')), 'B')) STORED;
CREATE INDEX issues_search ON issues USING GIN (search_vector);

ALTER TABLE issue_comments ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', regexp_replace(body, '[^[:alnum:]]+', ' ', 'g')), 'B')) STORED;
CREATE INDEX issue_comments_search ON issue_comments USING GIN (search_vector);

ALTER TABLE email_messages ADD COLUMN search_vector tsvector;

-- +goose StatementBegin
CREATE FUNCTION email_messages_search_vector(m email_messages) RETURNS tsvector LANGUAGE sql STABLE AS $$
    SELECT setweight(to_tsvector('simple', regexp_replace(COALESCE(m.envelope->>'subject', ''), '[^[:alnum:]]+', ' ', 'g')), 'A') ||
        setweight(to_tsvector('simple', regexp_replace(m.text || ' ' || COALESCE((SELECT string_agg(a.filename, ' ') FROM attachments a
            WHERE a.id IN (SELECT jsonb_array_elements_text(m.attachment_ids))), ''), '[^[:alnum:]]+', ' ', 'g')), 'B') ||
        setweight(to_tsvector('simple', regexp_replace(COALESCE(m.envelope->>'from', ''), '[^[:alnum:]]+', ' ', 'g')), 'C') ||
        setweight(to_tsvector('simple', regexp_replace(COALESCE(m.envelope->>'to', '') || ' ' || COALESCE(m.envelope->>'cc', ''),
            '[^[:alnum:]]+', ' ', 'g')), 'D')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION email_messages_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector := email_messages_search_vector(NEW);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER email_messages_search BEFORE INSERT OR UPDATE OF envelope, text, attachment_ids ON email_messages
    FOR EACH ROW EXECUTE FUNCTION email_messages_search_trigger();

UPDATE email_messages m SET search_vector = email_messages_search_vector(m);
CREATE INDEX email_messages_search ON email_messages USING GIN (search_vector);

-- +goose Down
DROP INDEX email_messages_search;
DROP TRIGGER email_messages_search ON email_messages;
DROP FUNCTION email_messages_search_trigger();
DROP FUNCTION email_messages_search_vector(email_messages);
ALTER TABLE email_messages DROP COLUMN search_vector;
DROP INDEX issue_comments_search;
ALTER TABLE issue_comments DROP COLUMN search_vector;
DROP INDEX issues_search;
ALTER TABLE issues DROP COLUMN search_vector;
