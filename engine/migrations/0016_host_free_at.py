from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ('engine', '0015_host_figures_and_job_log'),
    ]

    operations = [
        migrations.AddField(
            model_name='enginehost',
            name='free_at',
            field=models.DateTimeField(blank=True, help_text='Last time this host asked for work with room to spare (placement by key).', null=True),
        ),
    ]
