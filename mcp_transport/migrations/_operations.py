"""Index operations that InnoDB's key length rules out (MySQL, MariaDB: 3072 bytes).

0001 to 0004 indexed Subscription.uri, a CharField(2000) (8000 bytes in utf8mb4), alone and
unique with its session: MySQL refuses both keys, MariaDB keeps a prefix of one and a hidden hash
for the other. There those keys are never made, and 0005, which replaces them with a key on the
URI's hash, drops them only where an older migrate made them. Elsewhere these are the plain
operations. (Not a migration: the loader skips modules whose names start with "_".)
"""
from django.db import migrations


class _KeyAboveInnoDBLength:
    adds = True  # whether database_forwards makes the key (AddIndex) or drops it (RemoveIndex)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self._runs(app_label, schema_editor, from_state, making=self.adds):
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self._runs(app_label, schema_editor, from_state, making=not self.adds):
            super().database_backwards(app_label, schema_editor, from_state, to_state)

    def _runs(self, app_label, schema_editor, state, making: bool) -> bool:
        connection = schema_editor.connection
        if connection.vendor != "mysql":
            return True
        if making:
            return False
        table = state.apps.get_model(app_label, self.model_name)._meta.db_table
        with connection.cursor() as cursor:
            return self.key_name in connection.introspection.get_constraints(cursor, table)


class AddIndexExceptOnMySQL(_KeyAboveInnoDBLength, migrations.AddIndex):
    @property
    def key_name(self):
        return self.index.name


class AddConstraintExceptOnMySQL(_KeyAboveInnoDBLength, migrations.AddConstraint):
    @property
    def key_name(self):
        return self.constraint.name


class RemoveIndexWherePresent(_KeyAboveInnoDBLength, migrations.RemoveIndex):
    adds = False

    @property
    def key_name(self):
        return self.name


class RemoveConstraintWherePresent(_KeyAboveInnoDBLength, migrations.RemoveConstraint):
    adds = False

    @property
    def key_name(self):
        return self.name
