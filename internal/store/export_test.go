package store

// ListRunsSQL lets the external tests EXPLAIN the history query.
var ListRunsSQL = listRunsSQL
