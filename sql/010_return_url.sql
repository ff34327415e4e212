-- Where the confirmation pages send the person back to (the signup site's page).
-- Checked at create against RETURN_URL_ALLOWED_ORIGINS (api/return_url.py) and stored with the
-- verification, so a page can only ever link to what the site itself asked for: never an open redirect.
-- NULL: no return URL (the pages say "return to <product>" without a link).
ALTER TABLE verifications
    ADD COLUMN return_url text CONSTRAINT verifications_return_url_length
        CHECK (return_url IS NULL OR length(return_url) BETWEEN 8 AND 2048);
