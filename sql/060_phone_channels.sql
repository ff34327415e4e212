-- The message channels are email, sms, whatsapp (Twilio's Messages API, `whatsapp:` addresses) and
-- voice (Twilio's Calls API): every column naming a message channel takes the two new ones. Each
-- check is replaced by a wider one of the same name, added NOT VALID (no scan under the ALTER's lock)
-- and validated after it (a scan that lets writes go on); every row meets it.
ALTER TABLE verifications DROP CONSTRAINT verifications_channel_check,
    ADD CONSTRAINT verifications_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE verifications DROP CONSTRAINT verifications_fallback_channel,
    ADD CONSTRAINT verifications_fallback_channel
        CHECK (fallback_channel IN ('email', 'sms', 'whatsapp', 'voice') AND fallback_channel <> channel) NOT VALID;
ALTER TABLE verifications DROP CONSTRAINT verifications_verified_channel,
    ADD CONSTRAINT verifications_verified_channel
        CHECK (verified_channel IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE create_events DROP CONSTRAINT create_events_channel_check,
    ADD CONSTRAINT create_events_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE destination_suppressions DROP CONSTRAINT destination_suppressions_channel_check,
    ADD CONSTRAINT destination_suppressions_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_channel_check,
    ADD CONSTRAINT delivery_intents_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice', 'webhook')) NOT VALID;
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_event_subject,
    ADD CONSTRAINT delivery_intents_event_subject
        CHECK (event_subject IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE channel_holds DROP CONSTRAINT channel_holds_channel_check,
    ADD CONSTRAINT channel_holds_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')) NOT VALID;
ALTER TABLE channel_pacing DROP CONSTRAINT channel_pacing_channel_check,
    ADD CONSTRAINT channel_pacing_channel_check
        CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice', 'webhook')) NOT VALID;

ALTER TABLE verifications VALIDATE CONSTRAINT verifications_channel_check;
ALTER TABLE verifications VALIDATE CONSTRAINT verifications_fallback_channel;
ALTER TABLE verifications VALIDATE CONSTRAINT verifications_verified_channel;
ALTER TABLE create_events VALIDATE CONSTRAINT create_events_channel_check;
ALTER TABLE destination_suppressions VALIDATE CONSTRAINT destination_suppressions_channel_check;
ALTER TABLE delivery_intents VALIDATE CONSTRAINT delivery_intents_channel_check;
ALTER TABLE delivery_intents VALIDATE CONSTRAINT delivery_intents_event_subject;
ALTER TABLE channel_holds VALIDATE CONSTRAINT channel_holds_channel_check;
ALTER TABLE channel_pacing VALIDATE CONSTRAINT channel_pacing_channel_check;
