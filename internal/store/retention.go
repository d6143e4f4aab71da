package store

// The purges of the scheduler's own tables by data-retention (internal/jobs), which walks
// each batch by batch: a read of the next batch of expired ids after @after_id, at most
// @limit rows older than @cutoff, locked FOR UPDATE SKIP LOCKED (rows another transaction is
// writing are left for the next run instead of waited for), then a delete of exactly those
// rows (@ids). The statements live here with the store's other SQL on these tables.

// Purge is one table's pair of statements.
type Purge struct {
	ReadExpired string
	Delete      string
}

const (
	expiredIdempotencyKeysSQL = `
SELECT id FROM idempotency_keys
WHERE expires_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteIdempotencyKeysSQL = `DELETE FROM idempotency_keys WHERE id = ANY(@ids)`

	expiredMessageDeliveriesSQL = `
SELECT id FROM message_deliveries
WHERE created_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteMessageDeliveriesSQL = `DELETE FROM message_deliveries WHERE id = ANY(@ids)`

	expiredOperatorActionsSQL = `
SELECT id FROM operator_actions
WHERE at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteOperatorActionsSQL = `DELETE FROM operator_actions WHERE id = ANY(@ids)`

	// Notifications go with the runs they report (SCHEDULER_RETENTION_JOB_RUNS); an event
	// still waiting for its message, and a message still pending, stay.
	expiredNotificationsSQL = `
SELECT id FROM scheduler_notifications
WHERE created_at < @cutoff AND grouped_at IS NOT NULL AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteNotificationsSQL = `DELETE FROM scheduler_notifications WHERE id = ANY(@ids)`

	expiredNotificationDeliveriesSQL = `
SELECT id FROM scheduler_notification_deliveries
WHERE created_at < @cutoff AND status <> 'pending' AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteNotificationDeliveriesSQL = `DELETE FROM scheduler_notification_deliveries WHERE id = ANY(@ids)`
)

// The scheduler's tables' purges.
var (
	PurgeIdempotencyKeys        = Purge{expiredIdempotencyKeysSQL, deleteIdempotencyKeysSQL}
	PurgeMessageDeliveries      = Purge{expiredMessageDeliveriesSQL, deleteMessageDeliveriesSQL}
	PurgeOperatorActions        = Purge{expiredOperatorActionsSQL, deleteOperatorActionsSQL}
	PurgeNotifications          = Purge{expiredNotificationsSQL, deleteNotificationsSQL}
	PurgeNotificationDeliveries = Purge{expiredNotificationDeliveriesSQL, deleteNotificationDeliveriesSQL}
)
