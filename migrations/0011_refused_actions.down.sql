DELETE FROM operator_actions WHERE action = 'refused';
ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check
    CHECK (action IN ('trigger', 'cancel', 'pause', 'resume', 'step-down'));
