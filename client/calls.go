package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The calls of the job routes, in the Client's namespace. Namespace default's jobs are at
// /v1/jobs, with the built-in jobs; another namespace's at /v1/namespaces/{ns}/jobs.

func (c *Client) jobsPath() string {
	if c.namespace == "" || c.namespace == "default" {
		return "/v1/jobs"
	}
	return "/v1/namespaces/" + url.PathEscape(c.namespace) + "/jobs"
}

func (c *Client) jobPath(name string) string { return c.jobsPath() + "/" + url.PathEscape(name) }

// ListJobsOptions choose a page of jobs. The zero value asks for the first page, of the
// API's default size.
type ListJobsOptions struct {
	// Limit is the page's size (1 to 500; 0: the API's default, 100).
	Limit int
	// Cursor is a NextCursor of the same list, for the page after it.
	Cursor string
	// Status keeps the jobs failing, running, paused or disabled.
	Status string
	// AllNamespaces lists every namespace's jobs (an admin's call; GET /v1/jobs?namespace=*).
	AllNamespaces bool
}

// ListJobs reads one page of jobs; JobPage.NextCursor continues it.
func (c *Client) ListJobs(ctx context.Context, o ListJobsOptions) (*JobPage, error) {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	path := c.jobsPath()
	if o.AllNamespaces {
		path = "/v1/jobs"
		q.Set("namespace", "*")
	}
	var page JobPage
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, out: &page})
	return &page, err
}

// AllJobs reads every page of jobs, o.Limit at a time.
func (c *Client) AllJobs(ctx context.Context, o ListJobsOptions) ([]Job, error) {
	var all []Job
	for {
		page, err := c.ListJobs(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == nil || *page.NextCursor == "" || len(page.Jobs) == 0 {
			return all, nil
		}
		o.Cursor = *page.NextCursor
	}
}

// GetJob reads one job.
func (c *Client) GetJob(ctx context.Context, name string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(name), out: &j})
	return &j, err
}

// WriteJobOptions go with a runtime job's create, replace or delete.
type WriteJobOptions struct {
	// Version, when not 0, makes the change fail (412) unless the job is still at it.
	Version int64
	// DryRun checks the definition and changes nothing.
	DryRun bool
	// Reason goes to the change's audit row.
	Reason string
	// Force deletes a job that other jobs name in after (DeleteJob only; needs a Reason).
	Force bool
}

func (o WriteJobOptions) header() http.Header {
	var h http.Header
	if o.Version > 0 {
		h = http.Header{"If-Match": {`"` + strconv.FormatInt(o.Version, 10) + `"`}}
	}
	return reasonHeader(h, o.Reason)
}

func (o WriteJobOptions) query() url.Values {
	if !o.DryRun {
		return nil
	}
	return url.Values{"dry_run": {"true"}}
}

// CreateJob defines a runtime job (POST …/jobs); definition is its JSON definition, or a
// value that encodes to it.
func (c *Client) CreateJob(ctx context.Context, definition any, o WriteJobOptions) (*Job, error) {
	var j Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobsPath(), query: o.query(), body: definition, header: o.header(), out: &j})
	return &j, err
}

// PutJob creates or replaces runtime job name (PUT …/jobs/{name}).
func (c *Client) PutJob(ctx context.Context, name string, definition any, o WriteJobOptions) (*Job, error) {
	var j Job
	_, err := c.do(ctx, request{method: http.MethodPut, path: c.jobPath(name), query: o.query(), body: definition, header: o.header(), out: &j})
	return &j, err
}

// DeleteJob deletes runtime job name; its runs stay in the history.
func (c *Client) DeleteJob(ctx context.Context, name string, o WriteJobOptions) error {
	var q url.Values
	if o.Force {
		q = url.Values{"force": {"true"}}
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: c.jobPath(name), query: q, header: o.header()})
	return err
}

// PauseJob stops job name's scheduled runs; a trigger still runs it.
func (c *Client) PauseJob(ctx context.Context, name, reason string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(name) + "/pause", body: reasonBody(reason), out: &j})
	return &j, err
}

// ResumeJob starts a paused job's scheduled runs again.
func (c *Client) ResumeJob(ctx context.Context, name, reason string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(name) + "/resume", body: reasonBody(reason), out: &j})
	return &j, err
}

// TriggerOptions go with a trigger.
type TriggerOptions struct {
	// Params are the run's params ({"dry_run": true}, a runtime job's vars and headers).
	Params map[string]any
	// Reason is kept with the run and in the audit log.
	Reason string
	// IdempotencyKey (a UUID v4) makes a retry return the first call's run.
	IdempotencyKey string
	// Wait, when above 0, holds the answer until the run ends or Wait passes (the API
	// caps it at 5 minutes).
	Wait time.Duration
}

// Triggered is a trigger's answer: the run, and the answer's status: 202 for a run still
// queued or running, 200 for one this call did not queue (an Idempotency-Key's earlier
// run) or that ended within Wait.
type Triggered struct {
	Run    Run
	Status int
}

// TriggerRequest is POST …/jobs/{name}/runs's body, every member optional: Params is a JSON
// object ({"dry_run": true}, a runtime job's vars, body and headers).
type TriggerRequest struct {
	Params json.RawMessage `json:"params,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// TriggerRun runs job name now (POST …/jobs/{name}/runs).
func (c *Client) TriggerRun(ctx context.Context, name string, o TriggerOptions) (*Triggered, error) {
	body := TriggerRequest{Reason: o.Reason}
	if o.Params != nil {
		var err error
		if body.Params, err = json.Marshal(o.Params); err != nil {
			return &Triggered{}, encodeError(http.MethodPost, c.jobPath(name)+"/runs", err)
		}
	}
	q := url.Values{}
	if o.Wait > 0 {
		q.Set("wait", o.Wait.String())
	}
	var h http.Header
	if o.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {o.IdempotencyKey}}
	}
	var t Triggered
	status, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(name) + "/runs", query: q, body: body, header: h, out: &t.Run})
	t.Status = status
	return &t, err
}

// ListRunsOptions choose a page of a job's runs.
type ListRunsOptions struct {
	Limit   int    // 1 to 500; 0: the API's default, 50
	Status  string // only runs with this status
	Trigger string // only runs with this trigger
	Cursor  string // a NextCursor of the same query
}

// ListRuns reads a page of job name's runs, newest first.
func (c *Client) ListRuns(ctx context.Context, name string, o ListRunsOptions) (*RunPage, error) {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	for k, v := range map[string]string{"status": o.Status, "trigger": o.Trigger, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var page RunPage
	_, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(name) + "/runs", query: q, out: &page})
	return &page, err
}

// BackfillRequest is a backfill's window and choice of slots. Since and Until are RFC 3339
// times (2026-11-24T00:00:00Z), as the API reads them.
type BackfillRequest struct {
	Since  string `json:"since"`
	Until  string `json:"until"`
	Only   string `json:"only"` // missed, failed or all
	DryRun bool   `json:"dry_run"`
	Reason string `json:"reason,omitempty"`
}

// Backfill runs job name's slots of a window again, oldest first. A dry run's answer has
// no ID and lists the slots that would run.
func (c *Client) Backfill(ctx context.Context, name string, req BackfillRequest) (*Backfill, error) {
	var b Backfill
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(name) + "/backfill", body: req, out: &b})
	return &b, err
}

func runPath(id int64) string { return "/v1/runs/" + strconv.FormatInt(id, 10) }

// GetRun reads one run, with its attempts and output.
func (c *Client) GetRun(ctx context.Context, id int64) (*Run, error) {
	var r Run
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(id), out: &r})
	return &r, err
}

// CancelRun cancels a queued run at once, or asks the leader to cancel a running one (the
// answer's run is then still running, with CancelRequested).
func (c *Client) CancelRun(ctx context.Context, id int64, reason string) (*Run, error) {
	var r Run
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(id) + "/cancel", body: reasonBody(reason), out: &r})
	return &r, err
}

// RerunRun runs a run's slot again, with its time and Idempotency-Key.
func (c *Client) RerunRun(ctx context.Context, id int64, reason string) (*Run, error) {
	var r Run
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(id) + "/rerun", body: reasonBody(reason), out: &r})
	return &r, err
}

// Slot is one slot of a job's schedule and what became of it (GET …/jobs/{name}/slots).
type Slot struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	Outcome     string    `json:"outcome"`
	RunID       *int64    `json:"run_id"`
	Reason      *string   `json:"reason"`
	Runs        int       `json:"runs"`
}

// Slots is every slot of a job's window, oldest first, and how many had each outcome.
type Slots struct {
	Job       string         `json:"job"`
	Namespace string         `json:"namespace"`
	Since     time.Time      `json:"since"`
	Until     time.Time      `json:"until"`
	Slots     []Slot         `json:"slots"`
	Counts    map[string]int `json:"counts"`
}

// ListSlots reads job name's slots from since to until (RFC 3339; "" is the API's default:
// the last 24 hours up to now).
func (c *Client) ListSlots(ctx context.Context, name, since, until string) (*Slots, error) {
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if until != "" {
		q.Set("until", until)
	}
	var s Slots
	_, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(name) + "/slots", query: q, out: &s})
	return &s, err
}

// WaitingNotification is an event that waits for its rule's coalescing interval.
type WaitingNotification struct {
	Event       string     `json:"event"`
	RunID       *int64     `json:"run_id"`
	ScheduledAt *time.Time `json:"scheduled_at"`
	Status      *string    `json:"status"`
	Detail      *string    `json:"detail"`
	CreatedAt   time.Time  `json:"created_at"`
}

// JobNotifications is what a job's notify rules sent, newest first, and what still waits.
type JobNotifications struct {
	Job           string                `json:"job"`
	Namespace     string                `json:"namespace"`
	Notifications []Notification        `json:"notifications"`
	Waiting       []WaitingNotification `json:"waiting"`
}

// ListNotifications reads job name's last limit messages (0: the API's default, 50).
func (c *Client) ListNotifications(ctx context.Context, name string, limit int) (*JobNotifications, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var n JobNotifications
	_, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(name) + "/notifications", query: q, out: &n})
	return &n, err
}
