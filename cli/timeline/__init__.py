"""``lakeline timeline``: the commands that inspect a timeline (:mod:`.commands`) and the
HTML picture of one (:mod:`.report`)."""
