"""PostgreSQL transactions held at their commit for as long as a test says, to put commits in
the order a race needs: the group commit's tests and the feed's across hosts."""


def hold_commits_sql(lock: int, when: str | None = None) -> str:
    """The SQL that makes each commit of a new plant (of those `when` picks, an SQL condition on
    `NEW`) wait for a shared hold of the advisory `lock`: while the test holds it alone, those
    commits wait.

    The check is a deferred constraint trigger, which PostgreSQL runs at the commit, after every
    statement of the transaction: the transaction has written all it will, and is not answered
    before the test lets it go.
    """
    condition = f"\n    WHEN ({when})" if when else ""
    return f"""
CREATE FUNCTION wait_for_the_test() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({lock});
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER wait_for_the_test AFTER INSERT ON plants
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW{condition} EXECUTE FUNCTION wait_for_the_test();
"""
