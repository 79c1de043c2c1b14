package db

import "context"

// DownTo rolls the schema back to version with the migrations' Down
// sections: for tests that need pending migrations.
func DownTo(ctx context.Context, d *DB, version int64) error {
	p, err := d.provider(false)
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}
