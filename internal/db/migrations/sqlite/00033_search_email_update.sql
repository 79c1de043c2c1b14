-- Search follows an email's update (docs/api.md, "Search"): migration
-- 00030 indexed an email's text when it was inserted and removed it when
-- it was deleted, but not when the row changed, so content purged by
-- retention or purge-sender (text, attachments) stayed searchable, and
-- showed in the snippet, on SQLite. PostgreSQL's trigger already
-- recomputes the column on update. This trigger rewrites the FTS row in
-- the updating statement's transaction, and the rows purged before it are
-- indexed again from what they still hold.

-- +goose Up
-- +goose StatementBegin
CREATE TRIGGER search_email_update AFTER UPDATE OF envelope, text, attachment_ids ON email_messages BEGIN
    UPDATE search_fts SET title = COALESCE(json_extract(NEW.envelope, '$.subject'), ''), body = NEW.text,
            sender = COALESCE(json_extract(NEW.envelope, '$.from'), ''),
            recipients = COALESCE(json_extract(NEW.envelope, '$.to'), '') || ' ' || COALESCE(json_extract(NEW.envelope, '$.cc'), ''),
            attachments = COALESCE((SELECT group_concat(a.filename, ' ') FROM attachments a
                WHERE a.id IN (SELECT value FROM json_each(NEW.attachment_ids))), '')
        WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = NEW.id);
END;
-- +goose StatementEnd

UPDATE search_fts SET body = '', attachments = ''
    WHERE rowid IN (SELECT d.rid FROM search_docs d JOIN email_messages m ON m.id = d.doc_id WHERE m.content_purged_at IS NOT NULL);

-- +goose Down
DROP TRIGGER search_email_update;
