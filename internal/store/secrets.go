package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const secretCols = `id, company_id, name, provider, status, latest_version, created_at, updated_at`

func scanSecret(row rowScanner) (domain.Secret, error) {
	var v domain.Secret
	err := row.Scan(&v.ID, &v.CompanyID, &v.Name, &v.Provider, &v.Status, &v.LatestVersion, &v.CreatedAt, &v.UpdatedAt)
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	return v, err
}

// InsertSecretWithID stores a new secret with the given id (the vault seals
// the value bound to that id before the row exists) and its first version.
func (s *Store) InsertSecretWithID(ctx context.Context, q db.Querier, id string, v *domain.Secret, sealed string) error {
	v.ID = id
	v.CreatedAt = s.Now()
	v.UpdatedAt = v.CreatedAt
	v.Provider = "local_encrypted"
	v.Status = "active"
	v.LatestVersion = 1
	if _, err := q.ExecContext(ctx, `INSERT INTO company_secrets (`+secretCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`,
		v.ID, v.CompanyID, v.Name, v.Provider, v.Status, v.LatestVersion, v.CreatedAt, v.UpdatedAt); err != nil {
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("insert secret: %w", ErrConflict)
		}
		return fmt.Errorf("insert secret: %w", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO company_secret_versions (secret_id, version, sealed, created_at) VALUES ($1, 1, $2, $3)`,
		v.ID, sealed, v.CreatedAt); err != nil {
		return fmt.Errorf("insert secret version: %w", err)
	}
	return nil
}

// AddSecretVersion appends a sealed version and makes it the latest.
func (s *Store) AddSecretVersion(ctx context.Context, tx *sql.Tx, secretID, sealed string) (int, error) {
	var latest int
	if err := tx.QueryRowContext(ctx, `UPDATE company_secrets SET latest_version = latest_version + 1, updated_at = $2
		WHERE id = $1 AND status = 'active' RETURNING latest_version`, secretID, s.Now()).Scan(&latest); err != nil {
		return 0, notFound("add secret version", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO company_secret_versions (secret_id, version, sealed, created_at) VALUES ($1, $2, $3, $4)`,
		secretID, latest, sealed, s.Now()); err != nil {
		return 0, fmt.Errorf("add secret version: %w", err)
	}
	return latest, nil
}

// GetSecret returns an active secret's metadata.
func (s *Store) GetSecret(ctx context.Context, q db.Querier, id string) (domain.Secret, error) {
	return queryOne(ctx, q, "get secret", scanSecret, `SELECT `+secretCols+` FROM company_secrets WHERE id = $1 AND status = 'active'`, id)
}

// ListSecrets returns a page of a company's active secrets' metadata,
// newest first.
func (s *Store) ListSecrets(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.Secret, error) {
	return listPage(ctx, q, "list secrets", scanSecret, `SELECT `+secretCols+` FROM company_secrets`,
		`company_id = $1 AND status = 'active'`, []any{companyID}, "created_at", "id", p)
}

// SealedSecretVersion returns the sealed bytes of a version (0 = latest).
func (s *Store) SealedSecretVersion(ctx context.Context, q db.Querier, secretID string, version int) (string, int, error) {
	var sealed string
	var v int
	err := q.QueryRowContext(ctx, `SELECT sv.sealed, sv.version FROM company_secret_versions sv
		JOIN company_secrets s ON s.id = sv.secret_id
		WHERE sv.secret_id = $1 AND s.status = 'active' AND sv.version = CASE WHEN $2 = 0 THEN s.latest_version ELSE $2 END`,
		secretID, version).Scan(&sealed, &v)
	if err != nil {
		return "", 0, notFound("read secret version", err)
	}
	return sealed, v, nil
}

// BoundSealedSecret returns the secret bound at a target's config path
// with the sealed bytes of its latest active version, in one round trip
// (the binding, the secret's status and the version together). It is
// ErrNotFound when nothing is bound there or the secret is not active.
func (s *Store) BoundSealedSecret(ctx context.Context, q db.Querier, targetType, targetID, path string) (secretID, sealed string, version int, err error) {
	err = q.QueryRowContext(ctx, `SELECT b.secret_id, sv.sealed, sv.version FROM company_secret_bindings b
		JOIN company_secrets s ON s.id = b.secret_id AND s.status = 'active'
		JOIN company_secret_versions sv ON sv.secret_id = s.id AND sv.version = s.latest_version
		WHERE b.target_type = $1 AND b.target_id = $2 AND b.config_path = $3`,
		targetType, targetID, path).Scan(&secretID, &sealed, &version)
	if err != nil {
		return "", "", 0, notFound("read bound secret", err)
	}
	return secretID, sealed, version, nil
}

// DeleteSecret marks a secret deleted and destroys its sealed versions.
func (s *Store) DeleteSecret(ctx context.Context, q db.Querier, id string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE company_secrets SET status = 'deleted', deleted_at = $2, updated_at = $2 WHERE id = $1`, id, now); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM company_secret_versions WHERE secret_id = $1`, id); err != nil {
		return fmt.Errorf("delete secret versions: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM company_secret_bindings WHERE secret_id = $1`, id); err != nil {
		return fmt.Errorf("delete secret bindings: %w", err)
	}
	return nil
}

const bindingCols = `id, company_id, secret_id, target_type, target_id, config_path, version_selector, required, created_at`

func scanBinding(row rowScanner) (domain.SecretBinding, error) {
	var b domain.SecretBinding
	err := row.Scan(&b.ID, &b.CompanyID, &b.SecretID, &b.TargetType, &b.TargetID, &b.ConfigPath, &b.VersionSelector, &b.Required, &b.CreatedAt)
	b.CreatedAt = b.CreatedAt.UTC()
	return b, err
}

// PutBinding binds a secret to an object's config path, replacing any
// earlier binding at that path.
func (s *Store) PutBinding(ctx context.Context, q db.Querier, b *domain.SecretBinding) error {
	b.ID = NewID()
	b.CreatedAt = s.Now()
	if b.VersionSelector == "" {
		b.VersionSelector = "latest"
	}
	_, err := q.ExecContext(ctx, `INSERT INTO company_secret_bindings (`+bindingCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)
		ON CONFLICT (target_type, target_id, config_path) DO UPDATE SET secret_id = excluded.secret_id,
		version_selector = excluded.version_selector, required = excluded.required`,
		b.ID, b.CompanyID, b.SecretID, b.TargetType, b.TargetID, b.ConfigPath, b.VersionSelector, b.Required, b.CreatedAt)
	if err != nil {
		return fmt.Errorf("put secret binding: %w", err)
	}
	return nil
}

// ListBindings returns the bindings of a target object.
func (s *Store) ListBindings(ctx context.Context, q db.Querier, targetType, targetID string) ([]domain.SecretBinding, error) {
	return queryAll(ctx, q, "list secret bindings", scanBinding,
		`SELECT `+bindingCols+` FROM company_secret_bindings WHERE target_type = $1 AND target_id = $2 ORDER BY config_path`, targetType, targetID)
}

// DeleteBindings removes every binding of a target object and returns the
// secret ids they referenced.
func (s *Store) DeleteBindings(ctx context.Context, q db.Querier, targetType, targetID string) ([]string, error) {
	bs, err := s.ListBindings(ctx, q, targetType, targetID)
	if err != nil {
		return nil, err
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM company_secret_bindings WHERE target_type = $1 AND target_id = $2`, targetType, targetID); err != nil {
		return nil, fmt.Errorf("delete secret bindings: %w", err)
	}
	ids := make([]string, 0, len(bs))
	for _, b := range bs {
		ids = append(ids, b.SecretID)
	}
	return ids, nil
}

// DeleteBinding removes one binding by id.
func (s *Store) DeleteBinding(ctx context.Context, q db.Querier, id string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM company_secret_bindings WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete secret binding: %w", err)
	}
	return nil
}

// SecretBindingCount returns how many bindings still reference a secret.
func (s *Store) SecretBindingCount(ctx context.Context, q db.Querier, secretID string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_secret_bindings WHERE secret_id = $1`, secretID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count secret bindings: %w", err)
	}
	return n, nil
}
