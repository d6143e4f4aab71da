-- The audit log also records refused attempts to use the API (a wrong or missing token, the
-- read-only token on an action, a cross-site browser request, a Host that is not this
-- replica's): "refused", with the problem type and the request line in reason.
ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check
    CHECK (action IN ('trigger', 'cancel', 'pause', 'resume', 'step-down', 'refused'));
