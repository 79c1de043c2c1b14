-- Full-text search over tasks, comments and retained email (docs/api.md,
-- "Search"). One FTS5 table holds the searchable text of every kind; its
-- rowid is the rid of search_docs, which maps it to the row it came from.
-- Why a mapping table rather than the source tables' rowids: their rowids
-- are implicit (TEXT primary keys) and VACUUM, or VACUUM INTO of a backup,
-- may renumber implicit rowids; an INTEGER PRIMARY KEY never changes.
-- Triggers keep both in step with the rows, in the rows' own transaction.
-- Columns: title (a task's title, an email's subject), body (a
-- description, a comment, an email's text), sender and recipients (email
-- addresses and names), attachments (an email's attachment file names).

-- +goose Up
CREATE TABLE search_docs (
    rid INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('task', 'comment', 'email')),
    company_id TEXT NOT NULL
);

CREATE VIRTUAL TABLE search_fts USING fts5(title, body, sender, recipients, attachments,
    tokenize = 'unicode61 remove_diacritics 2');

INSERT INTO search_docs (doc_id, kind, company_id) SELECT id, 'task', company_id FROM issues;
INSERT INTO search_docs (doc_id, kind, company_id) SELECT id, 'comment', company_id FROM issue_comments;
INSERT INTO search_docs (doc_id, kind, company_id) SELECT id, 'email', company_id FROM email_messages;
INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
    SELECT d.rid, i.title, i.description, '', '', '' FROM issues i JOIN search_docs d ON d.doc_id = i.id;
INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
    SELECT d.rid, '', c.body, '', '', '' FROM issue_comments c JOIN search_docs d ON d.doc_id = c.id;
INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
    SELECT d.rid, COALESCE(json_extract(m.envelope, '$.subject'), ''), m.text, COALESCE(json_extract(m.envelope, '$.from'), ''),
        COALESCE(json_extract(m.envelope, '$.to'), '') || ' ' || COALESCE(json_extract(m.envelope, '$.cc'), ''),
        COALESCE((SELECT group_concat(a.filename, ' ') FROM attachments a WHERE a.id IN (SELECT value FROM json_each(m.attachment_ids))), '')
    FROM email_messages m JOIN search_docs d ON d.doc_id = m.id;

-- +goose StatementBegin
CREATE TRIGGER search_issue_insert AFTER INSERT ON issues BEGIN
    INSERT INTO search_docs (doc_id, kind, company_id) VALUES (NEW.id, 'task', NEW.company_id);
    INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
        VALUES ((SELECT rid FROM search_docs WHERE doc_id = NEW.id), NEW.title, NEW.description, '', '', '');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_issue_update AFTER UPDATE OF title, description ON issues BEGIN
    UPDATE search_fts SET title = NEW.title, body = NEW.description
        WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = NEW.id);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_issue_delete AFTER DELETE ON issues BEGIN
    DELETE FROM search_fts WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = OLD.id);
    DELETE FROM search_docs WHERE doc_id = OLD.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_comment_insert AFTER INSERT ON issue_comments BEGIN
    INSERT INTO search_docs (doc_id, kind, company_id) VALUES (NEW.id, 'comment', NEW.company_id);
    INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
        VALUES ((SELECT rid FROM search_docs WHERE doc_id = NEW.id), '', NEW.body, '', '', '');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_comment_update AFTER UPDATE OF body ON issue_comments BEGIN
    UPDATE search_fts SET body = NEW.body WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = NEW.id);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_comment_delete AFTER DELETE ON issue_comments BEGIN
    DELETE FROM search_fts WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = OLD.id);
    DELETE FROM search_docs WHERE doc_id = OLD.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_email_insert AFTER INSERT ON email_messages BEGIN
    INSERT INTO search_docs (doc_id, kind, company_id) VALUES (NEW.id, 'email', NEW.company_id);
    INSERT INTO search_fts (rowid, title, body, sender, recipients, attachments)
        VALUES ((SELECT rid FROM search_docs WHERE doc_id = NEW.id), COALESCE(json_extract(NEW.envelope, '$.subject'), ''), NEW.text,
            COALESCE(json_extract(NEW.envelope, '$.from'), ''),
            COALESCE(json_extract(NEW.envelope, '$.to'), '') || ' ' || COALESCE(json_extract(NEW.envelope, '$.cc'), ''),
            COALESCE((SELECT group_concat(a.filename, ' ') FROM attachments a
                WHERE a.id IN (SELECT value FROM json_each(NEW.attachment_ids))), ''));
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER search_email_delete AFTER DELETE ON email_messages BEGIN
    DELETE FROM search_fts WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = OLD.id);
    DELETE FROM search_docs WHERE doc_id = OLD.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER search_email_delete;
DROP TRIGGER search_email_insert;
DROP TRIGGER search_comment_delete;
DROP TRIGGER search_comment_update;
DROP TRIGGER search_comment_insert;
DROP TRIGGER search_issue_delete;
DROP TRIGGER search_issue_update;
DROP TRIGGER search_issue_insert;
DROP TABLE search_fts;
DROP TABLE search_docs;
