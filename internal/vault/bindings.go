package vault

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// SetBound stores value as the secret bound at an object's config path:
// the bound secret gets a new version, or a new company secret named name
// is created and bound. Inside the caller's transaction.
func (v *Vault) SetBound(ctx context.Context, tx *sql.Tx, companyID, targetType, targetID, path, name, value string) error {
	bs, err := v.store.ListBindings(ctx, tx, targetType, targetID)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if b.ConfigPath == path {
			_, err := v.RotateSecret(ctx, tx, b.SecretID, []byte(value))
			return err
		}
	}
	sec, err := v.CreateSecret(ctx, tx, companyID, name, []byte(value))
	if err != nil {
		return fmt.Errorf("vault %s: %w", path, err)
	}
	return v.store.PutBinding(ctx, tx, &domain.SecretBinding{CompanyID: companyID, SecretID: sec.ID, TargetType: targetType,
		TargetID: targetID, ConfigPath: path, Required: true})
}

// UnbindPaths removes an object's bindings whose path keep rejects, and
// deletes each formerly bound secret nothing references any more.
func (v *Vault) UnbindPaths(ctx context.Context, tx *sql.Tx, targetType, targetID string, keep func(path string) bool) error {
	bs, err := v.store.ListBindings(ctx, tx, targetType, targetID)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if keep(b.ConfigPath) {
			continue
		}
		if err := v.store.DeleteBinding(ctx, tx, b.ID); err != nil {
			return err
		}
		if _, err := v.DeleteIfUnreferenced(ctx, tx, b.SecretID); err != nil {
			return err
		}
	}
	return nil
}

// ResolveBound returns the values of every secret bound to an object, by
// config path. Only server code handing them to their consumer may call it.
func (v *Vault) ResolveBound(ctx context.Context, q db.Querier, targetType, targetID string) (map[string]string, error) {
	bs, err := v.store.ListBindings(ctx, q, targetType, targetID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(bs))
	for _, b := range bs {
		val, err := v.Resolve(ctx, q, b.SecretID, 0)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", b.ConfigPath, err)
		}
		out[b.ConfigPath] = string(val)
	}
	return out, nil
}
