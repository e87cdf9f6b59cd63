"""Desktop notifications (ADR 0030): the freedesktop service over D-Bus (``dbus``), the system
tray where there is none (``tray``), and the controller that feeds the notification book
(tolaria/chats/notify/) with the window's facts and carries out what its actions ask
(``control``)."""
