"""The instructor's grader: a student's copy graded against the pristine course, in a sandbox."""
