-- cdnca schema 11: an origin's description, free text for operators (0 to 200 characters, no
-- control characters: the API validates it; the CHECK bounds what any writer can store).
ALTER TABLE origins ADD COLUMN description TEXT NOT NULL DEFAULT ''
  CHECK (char_length(description) <= 200);
