-- The answer to the approval a worker waits on (worker-N.approval on
-- files): written by pg-loop approve or pg-dash on any host, taken (read
-- and cleared) by the worker. An approval_answer record, or null.
ALTER TABLE workers ADD COLUMN answer json;
