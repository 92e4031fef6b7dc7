from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0006_circuits'),  # the latest on main when written
    ]

    operations = [
        migrations.AddField(
            model_name='enginehost',
            name='draining',
            field=models.BooleanField(default=False, help_text='Claims no new partitions while set (console: drain).'),
        ),
        migrations.AddField(
            model_name='enginehost',
            name='memory_waiting',
            field=models.PositiveIntegerField(default=0, help_text='Reservations waiting for memory at the last heartbeat.'),
        ),
    ]
