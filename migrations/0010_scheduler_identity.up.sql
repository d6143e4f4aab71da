-- One row naming this deployment (this database) among every scheduler a receiver may hear
-- from: a message's Idempotency-Key carries it beside the delivery id, so two deployments
-- that share a webhook receiver never send the same key for different messages. It is
-- drawn once, here, so every replica of the deployment names it the same way.
CREATE TABLE scheduler_identity (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    deployment_id uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO scheduler_identity DEFAULT VALUES;
